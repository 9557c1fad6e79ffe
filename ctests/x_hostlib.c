/* The binding test program (run by ctests/binding_checks.py, not by the
 * matrix): a few collectives whose results it checks, then which MPI
 * libraries the rank has mapped. Built two ways: as a program (with
 * -DX_HOSTLIB_MAIN), and as a shared library that ctests/x_loader.c, a
 * program with no MPI, opens with RTLD_LOCAL, the way Python imports
 * mpi4py, so that MPI is not in the process's global scope.
 *
 * Each rank prints "x_hostlib: rank R maps N MPI libraries: PATHS" (the
 * distinct files named libmpi.so* or libmpich.so* in /proc/self/maps: a
 * pcoll that loaded an MPI of its own beside the program's shows 2) and
 * "x_hostlib: OK" if every result was right. 20 MPI_Allreduce, 20
 * MPI_Bcast, 20 MPI_Reduce calls of 256 ints on MPI_COMM_WORLD. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

enum { COUNT = 256, CALLS = 20, MAX_LIBS = 8 };

static int is_mpi_library(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "libmpi.so", 9) == 0 || strncmp(base, "libmpich.so", 11) == 0;
}

/* Prints the distinct MPI libraries in /proc/self/maps. */
static void report_mapped(int rank)
{
    char libs[MAX_LIBS][512], line[1024], path[512];
    int n = 0;
    FILE *maps = fopen("/proc/self/maps", "r");
    if (maps == NULL) {
        printf("x_hostlib: rank %d cannot read /proc/self/maps\n", rank);
        return;
    }
    while (fgets(line, sizeof line, maps) != NULL) {
        if (sscanf(line, "%*s %*s %*s %*s %*s %511s", path) != 1 || !is_mpi_library(path))
            continue;
        int seen = 0;
        for (int k = 0; k < n; k++)
            seen |= strcmp(libs[k], path) == 0;
        if (!seen && n < MAX_LIBS)
            strcpy(libs[n++], path);
    }
    fclose(maps);
    /* one write of the whole line: the launcher may interleave pieces */
    char text[MAX_LIBS * 520 + 64];
    int len = snprintf(text, sizeof text, "x_hostlib: rank %d maps %d MPI libraries:", rank, n);
    for (int k = 0; k < n; k++)
        len += snprintf(text + len, sizeof text - len, " %s", libs[k]);
    printf("%s\n", text);
    fflush(stdout);
}

int x_hostlib_run(void)
{
    int rank, size, wrong = 0;
    int in[COUNT], out[COUNT];
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int call = 0; call < CALLS; call++) {
        int root = call % size;
        for (int i = 0; i < COUNT; i++)
            in[i] = rank * 1000 + i + call;
        MPI_Allreduce(in, out, COUNT, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        for (int i = 0; i < COUNT; i++)
            wrong += out[i] != 1000 * size * (size - 1) / 2 + size * (i + call);
        MPI_Reduce(in, out, COUNT, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD);
        for (int i = 0; rank == root && i < COUNT; i++)
            wrong += out[i] != (size - 1) * 1000 + i + call;
        if (rank == root)
            memcpy(out, in, sizeof in);
        MPI_Bcast(out, COUNT, MPI_INT, root, MPI_COMM_WORLD);
        for (int i = 0; i < COUNT; i++)
            wrong += out[i] != root * 1000 + i + call;
    }
    report_mapped(rank);
    if (wrong == 0)
        printf("x_hostlib: OK\n");
    else
        printf("x_hostlib: rank %d: %d wrong elements\n", rank, wrong);
    fflush(stdout);
    MPI_Finalize();
    return wrong != 0;
}

#ifdef X_HOSTLIB_MAIN
int main(void) { return x_hostlib_run(); }
#endif
