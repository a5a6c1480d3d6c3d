/* Writes the machine of a synthetic description (hwloc's syntax, such as
 * "pack:2 l3:4 core:2 pu:1") as an hwloc XML file, the form in which Open
 * MPI takes a topology from a file (4.1: hwloc_base_topo_file, 5.0 and 6.0:
 * PRRTE's hwloc_use_topo_file). Usage: hwloc_machine <description> <file> */
#include <hwloc.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    hwloc_topology_t t;
    if (3 != argc) {
        fprintf(stderr, "usage: %s <synthetic description> <xml file>\n", argv[0]);
        return 2;
    }
    if (0 != hwloc_topology_init(&t) || 0 != hwloc_topology_set_synthetic(t, argv[1]) ||
        0 != hwloc_topology_load(t)) {
        fprintf(stderr, "hwloc_machine: not a machine: '%s'\n", argv[1]);
        return 1;
    }
    int rc = hwloc_topology_export_xml(t, argv[2], 0);
    hwloc_topology_destroy(t);
    if (0 != rc) {
        perror(argv[2]);
        return 1;
    }
    return 0;
}
