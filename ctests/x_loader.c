/* Loads a shared library with RTLD_LOCAL, as Python imports an extension
 * module (mpi4py's links MPI), and runs its x_hostlib_run(): a program
 * with no MPI of its own in the global scope (ctests/binding_checks.py). */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s LIBRARY\n", argv[0]);
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "x_loader: %s\n", dlerror());
        return 2;
    }
    int (*run)(void) = (int (*)(void))dlsym(lib, "x_hostlib_run");
    if (run == NULL) {
        fprintf(stderr, "x_loader: %s\n", dlerror());
        return 2;
    }
    return run();
}
