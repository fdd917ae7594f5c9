"""A minimal DeepSpeed job: one linear layer, a few steps, rank 0 reports."""
import deepspeed
import torch

model = torch.nn.Linear(1024, 1024)
config = {"train_batch_size": 8, "optimizer": {"type": "Adam", "params": {"lr": 1e-3}}}
engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
for step in range(10):
    x = torch.randn(8 // engine.world_size or 1, 1024, device=engine.device)
    loss = engine(x).pow(2).mean()
    engine.backward(loss)
    engine.step()
if engine.global_rank == 0:
    print(f"world size {engine.world_size}, final loss {loss.item():.4f}")
