/*
 * mpi-allreduce-bench: allreduce latency and bandwidth, the figure a
 * data-parallel training step waits on. For each message size it times
 * MPI_Allreduce (MPI_SUM over doubles) over many iterations after a
 * warm-up, and rank 0 prints one line per size:
 *   allreduce bytes=N iters=K avg_us=T busbw_MBps=B
 * busbw is the bus bandwidth as nccl-tests define it: bytes * 2(n-1)/n / t.
 * Usage: mpi-allreduce-bench [max_bytes] (default 4194304)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size;
    long max_bytes = argc > 1 ? atol(argv[1]) : 4L << 20;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long n_max = max_bytes / (long)sizeof(double);
    if (n_max < 1) n_max = 1;
    double *in = malloc(n_max * sizeof(double)), *out = malloc(n_max * sizeof(double));
    if (!in || !out) MPI_Abort(MPI_COMM_WORLD, 1);
    for (long i = 0; i < n_max; i++) in[i] = rank + i * 1e-6;
    for (long n = 1; n <= n_max; n *= 16) {
        long bytes = n * (long)sizeof(double);
        int iters = bytes <= 65536 ? 1000 : bytes <= (1 << 20) ? 100 : 20;
        for (int i = 0; i < iters / 10 + 1; i++)
            MPI_Allreduce(in, out, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            MPI_Allreduce(in, out, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double t = (MPI_Wtime() - t0) / iters, worst;
        MPI_Reduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            double busbw = bytes * 2.0 * (size - 1) / size / worst / 1e6;
            printf("allreduce bytes=%ld iters=%d avg_us=%.2f busbw_MBps=%.1f\n", bytes, iters, worst * 1e6, busbw);
            fflush(stdout);
        }
    }
    free(in);
    free(out);
    MPI_Finalize();
    return 0;
}
