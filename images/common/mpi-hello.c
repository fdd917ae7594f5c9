/*
 * mpi-hello: the smallest program that proves an MPI job really spans its
 * nodes. Every rank prints its rank, the world size and its host name; then
 * all ranks sum their ranks with MPI_Allreduce and rank 0 checks the result.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size, len;
    long sum = 0, mine;
    char host[MPI_MAX_PROCESSOR_NAME];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);
    printf("mpi-hello: rank %d of %d on %s\n", rank, size, host);
    fflush(stdout);

    mine = rank;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        long want = (long)size * (size - 1) / 2;
        if (sum != want) {
            fprintf(stderr, "mpi-hello: allreduce gave %ld, want %ld\n", sum, want);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        printf("mpi-hello: allreduce over %d ranks ok (sum %ld)\n", size, sum);
    }
    MPI_Finalize();
    return 0;
}
