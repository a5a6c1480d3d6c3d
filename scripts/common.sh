# Shared by the scripts: how we launch jobs against a private component dir.
# Source it; needs COMPONENT_DIR (holding mca_coll_hwbarr.so).

if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
PKGLIBDIR=$(ompi_info --path pkglibdir --parsable | sed 's/.*://')

# hw_mpirun <np> [mpirun args...]: oversubscription allowed, ours (first, so
# that it shadows an installed hwbarr) plus Open MPI's own components, not
# whatever sits in ~/.openmpi/components.
hw_mpirun() {
  local oversub="--oversubscribe"
  case "$(ompi_info --version 2>/dev/null)" in *"Open MPI v4"*) ;; *) oversub="--map-by :OVERSUBSCRIBE" ;; esac
  local np=$1; shift
  timeout -k 5 "${HW_TIMEOUT:-300}" mpirun $oversub --bind-to none -np "$np" \
    --mca mca_base_component_path "$COMPONENT_DIR:$PKGLIBDIR" "$@"
}
