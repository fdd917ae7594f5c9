"""A first MPI job from Python, on the local cluster (`make dev-detach`):
2 Workers with 2 slots each, watched to the end, its logs, then cleaned up."""
import os

from mpijob import MPIJobClient

client = MPIJobClient(namespace="team-a", context="dev-a",
                      config_file=os.environ.get("KUBECONFIG", ".local/kubeconfig"))
client.create_job("quickstart", command=None, workers=2, slots_per_worker=2)
for event in client.watch("quickstart", timeout=300):
    print(f"{event.kind:<10} {event.phase:<10} {event.message}")
print(client.get_logs("quickstart", worker="all"))
client.delete_job("quickstart")
