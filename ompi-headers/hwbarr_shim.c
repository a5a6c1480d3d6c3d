/* hwbarr's C glue: plain functions around Open MPI macros and static
 * inlines that Rust cannot call. Each is a one-liner on purpose; all
 * logic lives in Rust. */
#include "ompi_config.h"
#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/group/group.h"
#include "ompi/mca/coll/coll.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/request/request.h"
#include "opal/class/opal_object.h"

#include "hwbarr_shim.h"

/* Implemented in Rust (src/module.rs): drops the module's Rust state. */
extern void hwbarr_module_state_drop(void *state);

typedef struct {
    mca_coll_base_module_t super;
    void *state;
} hwb_module_t;

static void hwb_module_construct(hwb_module_t *m) { m->state = NULL; }

static void hwb_module_destruct(hwb_module_t *m)
{
    if (NULL != m->state) {
        void *s = m->state;
        m->state = NULL;
        hwbarr_module_state_drop(s);
    }
}

static OBJ_CLASS_INSTANCE(hwb_module_t, mca_coll_base_module_t,
                          hwb_module_construct, hwb_module_destruct);

mca_coll_base_module_t *hwb_module_new(void)
{
    hwb_module_t *m = OBJ_NEW(hwb_module_t);
    return m ? &m->super : NULL;
}

void hwb_module_set_state(mca_coll_base_module_t *m, void *state) { ((hwb_module_t *) m)->state = state; }
void *hwb_module_state(mca_coll_base_module_t *m) { return ((hwb_module_t *) m)->state; }
void hwb_obj_retain(void *obj) { OBJ_RETAIN((opal_object_t *) obj); }
void hwb_obj_release(void *obj) { opal_object_t *o = obj; OBJ_RELEASE(o); }

int hwb_comm_rank(ompi_communicator_t *comm) { return ompi_comm_rank(comm); }
int hwb_comm_size(ompi_communicator_t *comm) { return ompi_comm_size(comm); }
int hwb_comm_is_inter(ompi_communicator_t *comm) { return OMPI_COMM_IS_INTER(comm) ? 1 : 0; }
int hwb_comm_has_remote_peers(ompi_communicator_t *comm)
{
    return ompi_group_have_remote_peers(comm->c_local_group) ? 1 : 0;
}
uint32_t hwb_comm_cid(ompi_communicator_t *comm) { return ompi_comm_get_cid(comm); }
const char *hwb_comm_name(ompi_communicator_t *comm) { return comm->c_name; }

void hwb_comm_current_barrier(ompi_communicator_t *comm, hwb_barrier_fn *fn,
                              mca_coll_base_module_t **module)
{
    *fn = comm->c_coll->coll_barrier;
    *module = comm->c_coll->coll_barrier_module;
}

int hwb_pml_send(const void *buf, size_t len, int dst, int tag, ompi_communicator_t *comm)
{
    return MCA_PML_CALL(send((void *) buf, len, MPI_BYTE, dst, tag,
                             MCA_PML_BASE_SEND_STANDARD, comm));
}

int hwb_pml_recv(void *buf, size_t len, int src, int tag, ompi_communicator_t *comm)
{
    return MCA_PML_CALL(recv(buf, len, MPI_BYTE, src, tag, comm, MPI_STATUS_IGNORE));
}

int hwb_pml_isend(const void *buf, size_t len, int dst, int tag, ompi_communicator_t *comm,
                  ompi_request_t **req)
{
    return MCA_PML_CALL(isend((void *) buf, len, MPI_BYTE, dst, tag,
                              MCA_PML_BASE_SEND_STANDARD, comm, req));
}

int hwb_pml_irecv(void *buf, size_t len, int src, int tag, ompi_communicator_t *comm,
                  ompi_request_t **req)
{
    return MCA_PML_CALL(irecv(buf, len, MPI_BYTE, src, tag, comm, req));
}

int hwb_request_test(ompi_request_t **req, int *done)
{
    return ompi_request_test(req, done, MPI_STATUS_IGNORE);
}
