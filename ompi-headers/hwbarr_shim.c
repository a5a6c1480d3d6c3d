/* hwbarr's C glue: plain functions around Open MPI macros and static
 * inlines that Rust cannot call. Each is a one-liner on purpose; all
 * logic lives in Rust. */
#include "ompi_config.h"
#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/group/group.h"
#include "ompi/mca/coll/coll.h"
#include "ompi/mca/coll/base/base.h"
#include "ompi/mca/coll/base/coll_tags.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/request/request.h"
#include "ompi/runtime/mpiruntime.h"
#include "opal/class/opal_object.h"
#include "opal/mca/base/mca_base_pvar.h"
#include "opal/mca/base/mca_base_var_enum.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"
#if OMPI_MAJOR_VERSION < 5
#include "opal/mca/pmix/pmix.h"
/* Weak references: 4.1's PMIx layer, which 5.0 and later do not have; a
 * 4.1 build loaded by them must still load, to say in one line that it was
 * built for another release (it never asks PMIx there). */
#pragma weak opal_pmix
#pragma weak opal_value_t_class
#pragma weak opal_value_unload
#endif

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hwbarr_shim.h"

#if defined(OPAL_ENABLE_FT_MPI) && OPAL_ENABLE_FT_MPI
/* Weak references: a 5.0 or later build loaded by a 4.1 Open MPI (whose
 * libmpi.so.40 has the same name) must still load, to say in one line that
 * it was built for another release; 4.1 has neither symbol (used by
 * ompi_request_is_failed, which only a build with fault tolerance calls). */
#pragma weak ompi_ftmpi_enabled
#pragma weak ompi_request_is_failed_fn
#endif

/* Implemented in Rust (src/ompi/module.rs): drops the module's Rust state. */
extern void hwbarr_module_state_drop(void *state);

typedef struct {
    mca_coll_base_module_t super;
    void *state;
    /* What held our slots before us (coll API 3.0.0, where a module
     * installs its own functions): put back at disable. */
    mca_coll_base_module_barrier_fn_t prev_barrier;
    mca_coll_base_module_t *prev_barrier_module;
    mca_coll_base_module_ibarrier_fn_t prev_ibarrier;
    mca_coll_base_module_t *prev_ibarrier_module;
    mca_coll_base_module_barrier_init_fn_t prev_barrier_init;
    mca_coll_base_module_t *prev_barrier_init_module;
} hwb_module_t;

static void hwb_module_construct(hwb_module_t *m)
{
    m->state = NULL;
    m->prev_barrier = NULL;
    m->prev_barrier_module = NULL;
    m->prev_ibarrier = NULL;
    m->prev_ibarrier_module = NULL;
    m->prev_barrier_init = NULL;
    m->prev_barrier_init_module = NULL;
}

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

#if defined(OPAL_ENABLE_FT_MPI) && OPAL_ENABLE_FT_MPI
extern void hwbarr_module_revoked(void *state, int code);

/* Open MPI's fault tolerance (ULFM, mpi_ft_enable) revoked the collectives
 * of our communicator: a process of it failed (MPI_ERR_PROC_FAILED), or
 * MPIX_Comm_revoke revoked it (MPI_ERR_REVOKED). Called in every process
 * that learns: from progress, MPIX_Comm_revoke or the failure detector. */
static int hwb_module_revoked(struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    hwbarr_module_revoked(((hwb_module_t *) module)->state,
                          ompi_comm_is_revoked(comm) ? MPI_ERR_REVOKED : MPI_ERR_PROC_FAILED);
    return OMPI_SUCCESS;
}
#endif

mca_coll_base_module_t *hwb_module_new(void)
{
    hwb_module_t *m = OBJ_NEW(hwb_module_t);
    if (NULL == m) {
        return NULL;
    }
#if defined(OPAL_ENABLE_FT_MPI) && OPAL_ENABLE_FT_MPI
    m->super.coll_revoke_local = hwb_module_revoked;
#endif
    return &m->super;
}

#if defined(MCA_COLL_BASE_VERSION_3_0_0)
/* Coll API 3.0.0 (Open MPI 6.0): the base no longer copies a module's
 * functions into comm->c_coll; each module saves what is there and installs
 * its own at enable, and at disable (reverse enable order) puts back what
 * it saved where the slot is still its own. */
#define HWB_SWAP_IN(comm, m, api)                                          \
    do {                                                                   \
        if (NULL != (m)->super.coll_##api) {                               \
            (m)->prev_##api = (comm)->c_coll->coll_##api;                  \
            (m)->prev_##api##_module = (comm)->c_coll->coll_##api##_module; \
            (comm)->c_coll->coll_##api = (m)->super.coll_##api;            \
            (comm)->c_coll->coll_##api##_module = &(m)->super;             \
        }                                                                  \
    } while (0)
#define HWB_SWAP_OUT(comm, m, api)                                         \
    do {                                                                   \
        if (&(m)->super == (comm)->c_coll->coll_##api##_module) {          \
            (comm)->c_coll->coll_##api = (m)->prev_##api;                  \
            (comm)->c_coll->coll_##api##_module = (m)->prev_##api##_module; \
        }                                                                  \
        (m)->prev_##api = NULL;                                            \
        (m)->prev_##api##_module = NULL;                                   \
    } while (0)
#endif

void hwb_module_install(mca_coll_base_module_t *module, ompi_communicator_t *comm)
{
#if defined(MCA_COLL_BASE_VERSION_3_0_0)
    hwb_module_t *m = (hwb_module_t *) module;
    HWB_SWAP_IN(comm, m, barrier);
    HWB_SWAP_IN(comm, m, ibarrier);
    HWB_SWAP_IN(comm, m, barrier_init);
#else
    (void) module;
    (void) comm;
#endif
}

void hwb_module_uninstall(mca_coll_base_module_t *module, ompi_communicator_t *comm)
{
#if defined(MCA_COLL_BASE_VERSION_3_0_0)
    hwb_module_t *m = (hwb_module_t *) module;
    HWB_SWAP_OUT(comm, m, barrier);
    HWB_SWAP_OUT(comm, m, ibarrier);
    HWB_SWAP_OUT(comm, m, barrier_init);
#else
    (void) module;
    (void) comm;
#endif
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
int hwb_comm_local_ranks(ompi_communicator_t *comm)
{
    return ompi_group_count_local_peers(comm->c_local_group);
}
uint32_t hwb_comm_cid(ompi_communicator_t *comm)
{
#if OMPI_MAJOR_VERSION >= 5
    return ompi_comm_get_local_cid(comm);
#else
    return ompi_comm_get_cid(comm);
#endif
}
const char *hwb_comm_name(ompi_communicator_t *comm) { return comm->c_name; }

void hwb_comm_current_barrier(ompi_communicator_t *comm, hwb_barrier_fn *fn,
                              mca_coll_base_module_t **module)
{
    *fn = comm->c_coll->coll_barrier;
    *module = comm->c_coll->coll_barrier_module;
}

int hwb_runtime_version(int *major, int *minor, int *release)
{
    /* Looked up, not linked: on 6.0 the MPI layer (libmpi) is a library of
     * its own that ompi_info does not load (it has only libopen_mpi), and a
     * reference to it would keep ompi_info from opening the component. */
    typedef int (*version_fn)(char *, int *);
    version_fn get_version = (version_fn) (uintptr_t) dlsym(RTLD_DEFAULT, "MPI_Get_library_version");
    char text[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (NULL == get_version) {
        /* No MPI layer: the version Open MPI's own coll/basic announces
         * (built into Open MPI since 5.0; the header of a component's
         * version block is the same MCA 2.1.0 layout on every line). */
        const mca_base_component_t *basic = dlsym(RTLD_DEFAULT, "mca_coll_basic_component");
        if (NULL == basic || 0 != strcmp(basic->mca_project_name, "ompi")) {
            return -1;
        }
        *major = basic->mca_project_major_version;
        *minor = basic->mca_project_minor_version;
        *release = basic->mca_project_release_version;
        return 0;
    }
    if (MPI_SUCCESS != get_version(text, &len)) {
        return -1;
    }
    text[len < MPI_MAX_LIBRARY_VERSION_STRING ? len : MPI_MAX_LIBRARY_VERSION_STRING - 1] = '\0';
    return 3 == sscanf(text, "Open MPI v%d.%d.%d", major, minor, release) ? 0 : -1;
}

int hwb_job_local_ranks(void)
{
    return (int) opal_process_info.num_local_peers + 1;
}

int hwb_job_local_rank(void)
{
    return (int) opal_process_info.my_local_rank;
}

#if OMPI_MAJOR_VERSION < 5
/* The string 4.1's PMIx layer holds for this process under `key`,
 * malloc'ed, or NULL. */
static char *own_pmix_string(const char *key)
{
    char *val = NULL;
    int rc;
    if (NULL == &opal_pmix || NULL == opal_pmix.get) {
        return NULL;
    }
    OPAL_MODEX_RECV_VALUE_OPTIONAL(rc, key, &OPAL_PROC_MY_NAME, &val, OPAL_STRING);
    return OPAL_SUCCESS == rc ? val : NULL;
}
#else
static char *dup_or_null(const char *s) { return NULL != s ? strdup(s) : NULL; }
#endif

char *hwb_locality_string(void)
{
    /* Where the runtime bound this process, as objects of Open MPI's
     * hwloc topology ("SK0:L30:...:NM0"); none when it did not bind it. */
#if OMPI_MAJOR_VERSION >= 5
    return dup_or_null(opal_process_info.locality);
#else
    return own_pmix_string(OPAL_PMIX_LOCALITY_STRING);
#endif
}

char *hwb_cpuset_string(void)
{
    /* The CPUs the runtime bound this process to, as a list ("0-3,8"). */
#if OMPI_MAJOR_VERSION >= 5
    return dup_or_null(opal_process_info.cpuset);
#else
    return own_pmix_string(OPAL_PMIX_CPUSET);
#endif
}

int hwb_mpi_yield_when_idle(void)
{
    const bool *value = NULL;
    int idx = mca_base_var_find("ompi", "mpi", NULL, "yield_when_idle");
    if (idx >= 0 && OPAL_SUCCESS == mca_base_var_get_value(idx, &value, NULL, NULL) && NULL != value && *value) {
        return 1;
    }
    return opal_progress_yield_when_idle ? 1 : 0;
}

/* The engine's yield switch while hwb_progress_unyielding's turn has it
 * off (only without MPI_THREAD_MULTIPLE: one thread). */
static bool unyielding_saved = false;

int hwb_progress_yields(void) { return opal_progress_yield_when_idle || unyielding_saved ? 1 : 0; }

/* The value of a string MCA variable, or NULL when unset or unknown. */
static const char *string_var(const char *project, const char *framework, const char *component,
                              const char *name)
{
    char **value = NULL;
    int idx = mca_base_var_find(project, framework, component, name);
    if (idx < 0 || OPAL_SUCCESS != mca_base_var_get_value(idx, &value, NULL, NULL) || NULL == value) {
        return NULL;
    }
    return *value;
}

int hwb_mpi_thread_multiple(void) { return ompi_mpi_thread_multiple ? 1 : 0; }

int hwb_progress_unyielding(void)
{
    if (ompi_mpi_thread_multiple) {
        opal_progress();
        return -1;
    }
    bool yield = opal_progress_set_yield_when_idle(false);
    bool outer = unyielding_saved;
    unyielding_saved = yield || outer;
    opal_progress();
    unyielding_saved = outer;
    opal_progress_set_yield_when_idle(yield);
    return yield ? 1 : 0;
}

const char *hwb_coll_selection(void) { return string_var("ompi", "coll", NULL, NULL); }

const char *hwb_component_path(void) { return string_var("opal", "mca", "base", "component_path"); }

const char *hwb_coll_static_component(int i)
{
    /* 6.0 lists the components through one more pointer each. */
#if OMPI_MAJOR_VERSION >= 6
    const mca_base_component_t ***list = ompi_coll_base_framework.framework_static_components;
#define HWB_STATIC(k) (*list[k])
#else
    const mca_base_component_t **list = ompi_coll_base_framework.framework_static_components;
#define HWB_STATIC(k) (list[k])
#endif
    for (int k = 0; NULL != list && NULL != list[k]; ++k) {
        if (k == i) {
            return NULL != HWB_STATIC(k) ? HWB_STATIC(k)->mca_component_name : NULL;
        }
    }
#undef HWB_STATIC
    return NULL;
}

void hwb_show_help_add_dir(const char *dir) { (void) opal_show_help_add_dir(dir); }

char *hwb_help_string(const char *topic, const char *summary)
{
    return opal_show_help_string("help-coll-hwbarr.txt", topic, true, summary);
}

void hwb_free(void *p) { free(p); }

int hwb_output_open(int verbosity)
{
    opal_output_stream_t lds;
    int stream;
    OBJ_CONSTRUCT(&lds, opal_output_stream_t);
    lds.lds_want_stderr = true;
    lds.lds_verbose_level = verbosity;
    stream = opal_output_open(&lds);
    OBJ_DESTRUCT(&lds);
    return stream;
}

void hwb_output(int stream, const char *line)
{
    /* opal_output, not opal_output_verbose: that macro calls a function 5.0
     * has and 4.1 lacks, and the .so must load into both far enough to
     * tell a version mismatch. The level is checked by the caller. */
    opal_output(stream, "%s", line);
}

int hwb_register_enum_param(const mca_base_component_t *component, const char *name,
                            const char *description, int info_level, const char *const *names,
                            int count, int *storage)
{
    /* Kept for the process's life: some releases keep the pointer. */
    mca_base_var_enum_value_t *values = calloc((size_t) count + 1, sizeof(*values));
    mca_base_var_enum_t *enumerator = NULL;
    char enum_name[128];
    int rc;
    if (NULL == values) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    for (int i = 0; i < count; ++i) {
        values[i].value = i;
        values[i].string = names[i];
    }
    snprintf(enum_name, sizeof(enum_name), "coll_hwbarr_%s", name);
    rc = mca_base_var_enum_create(enum_name, values, &enumerator);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    rc = mca_base_component_var_register(component, name, description, MCA_BASE_VAR_TYPE_INT,
                                         enumerator, 0, 0, (mca_base_var_info_lvl_t) info_level,
                                         MCA_BASE_VAR_SCOPE_READONLY, storage);
    OBJ_RELEASE(enumerator);
    return rc;
}

int hwb_pvar_register_comm_counter(const mca_base_component_t *component, const char *name,
                                   const char *description, hwb_pvar_get_fn get,
                                   hwb_pvar_notify_fn notify)
{
    return mca_base_component_pvar_register(component, name, description, OPAL_INFO_LVL_4,
                                            MPI_T_PVAR_CLASS_COUNTER,
                                            MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL,
                                            MPI_T_BIND_MPI_COMM,
                                            MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS,
                                            (mca_base_get_value_fn_t) get, NULL,
                                            (mca_base_notify_fn_t) notify, NULL);
}

int hwb_pvar_event_is_bind(int event) { return MCA_BASE_PVAR_HANDLE_BIND == event ? 1 : 0; }

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

int hwb_pml_iprobe(int tag, ompi_communicator_t *comm, int *src, size_t *bytes)
{
    int matched = 0;
    ompi_status_public_t st;
    if (OMPI_SUCCESS != MCA_PML_CALL(iprobe(MPI_ANY_SOURCE, tag, comm, &matched, &st)) || !matched) {
        return 0;
    }
    *src = st.MPI_SOURCE;
    *bytes = st._ucount;
    return 1;
}

/* The same bookkeeping as Open MPI's ompi_coll_base_nbc_reserve_tags (a
 * static inline whose header does not compile outside Open MPI's tree):
 * the communicator's next non-blocking collective tag, wrapping at the end
 * of their range. */
int hwb_nbc_reserve_tag(ompi_communicator_t *comm)
{
    int32_t tag, old;
    do {
        tag = old = comm->c_nbc_tag;
        if (tag - 1 < MCA_COLL_BASE_TAG_NONBLOCKING_END) {
            tag = MCA_COLL_BASE_TAG_NONBLOCKING_BASE;
        }
    } while (!OPAL_ATOMIC_COMPARE_EXCHANGE_STRONG_32(&comm->c_nbc_tag, &old, tag - 1));
    return tag;
}

typedef struct {
    ompi_request_t super;
    void *owner;
} hwb_request_t;

static OBJ_CLASS_INSTANCE(hwb_request_t, ompi_request_t, NULL, NULL);

ompi_request_t *hwb_request_new(ompi_communicator_t *comm, int persistent, void *owner,
                                hwb_start_fn start, hwb_free_fn free_fn, hwb_cancel_fn cancel)
{
    hwb_request_t *r = OBJ_NEW(hwb_request_t);
    if (NULL == r) {
        return NULL;
    }
    OMPI_REQUEST_INIT(&r->super, persistent ? true : false);
    r->super.req_type = OMPI_REQUEST_COLL;
    r->super.req_state = persistent ? OMPI_REQUEST_INACTIVE : OMPI_REQUEST_ACTIVE;
    r->super.req_status.MPI_ERROR = OMPI_SUCCESS;
    r->super.req_start = (ompi_request_start_fn_t) start;
    r->super.req_free = free_fn;
    r->super.req_cancel = cancel;
    r->super.req_mpi_object.comm = comm;
    r->owner = owner;
    return &r->super;
}

void *hwb_request_owner(ompi_request_t *req) { return ((hwb_request_t *) req)->owner; }
int hwb_request_is_persistent(ompi_request_t *req) { return req->req_persistent ? 1 : 0; }
int hwb_request_is_complete(ompi_request_t *req) { return REQUEST_COMPLETE(req) ? 1 : 0; }

void hwb_request_activate(ompi_request_t *req)
{
    req->req_complete = REQUEST_PENDING;
    req->req_state = OMPI_REQUEST_ACTIVE;
    req->req_status.MPI_ERROR = OMPI_SUCCESS;
}

void hwb_request_complete(ompi_request_t *req, int error)
{
    req->req_status.MPI_ERROR = error;
    ompi_request_complete(req, true);
}

void hwb_request_complete_unwaited(ompi_request_t *req, int error)
{
    req->req_status.MPI_ERROR = error;
    ompi_request_complete(req, false);
}

void hwb_request_forget(ompi_request_t **req) { *req = MPI_REQUEST_NULL; }

void hwb_request_retire(ompi_request_t *req) { OMPI_REQUEST_FINI(req); }

void hwb_request_reissue(ompi_request_t *req)
{
    OMPI_REQUEST_INIT(req, false);
    req->req_state = OMPI_REQUEST_ACTIVE;
    req->req_status.MPI_ERROR = OMPI_SUCCESS;
}

void hwb_request_release(ompi_request_t **req)
{
    OMPI_REQUEST_FINI(*req);
    OBJ_RELEASE(*req);
    *req = MPI_REQUEST_NULL;
}

int hwb_request_done(ompi_request_t **req, int *error)
{
    if (!REQUEST_COMPLETE(*req)) {
#if defined(OPAL_ENABLE_FT_MPI) && OPAL_ENABLE_FT_MPI
        /* Fault tolerance on: a request whose peer failed, or a collective
         * one on a communicator whose collectives were revoked, would never
         * complete. Open MPI cancels it and says so once the cancel has
         * completed it (the buffer released), with the error set. */
        /* (A build refused by a 4.1 Open MPI never gets here; the weak
         * symbols are checked all the same.) */
        if (&ompi_ftmpi_enabled == NULL || !ompi_request_is_failed(*req)) {
            return 0;
        }
        if (MPI_SUCCESS == (*req)->req_status.MPI_ERROR) {
            (*req)->req_status.MPI_ERROR = MPI_ERR_PROC_FAILED;
        }
#else
        return 0;
#endif
    }
    *error = (*req)->req_status.MPI_ERROR;
    ompi_request_free(req);
    *req = NULL;
    return 1;
}
