/* hwbarr's C glue: what bindgen cannot turn into callable symbols
 * (Open MPI macros such as OBJ_NEW/MCA_PML_CALL and static inline
 * accessors), wrapped in plain functions. Our own code, not Open MPI's. */
#ifndef HWBARR_SHIM_H
#define HWBARR_SHIM_H

#include <stddef.h>
#include <stdint.h>

#include "ompi/mca/coll/coll.h"

/* Unversioned names only: mca_coll_base_module_t is the 2.3.0 module on
 * Open MPI 4.1, the 2.4.0 one on 5.0 and the 3.0.0 one on 6.0. */

/* --- module object (an OBJ subclass of mca_coll_base_module_t) --- */
/* Creates a module whose destructor hands `state` back to Rust. */
mca_coll_base_module_t *hwb_module_new(void);
void  hwb_module_set_state(mca_coll_base_module_t *m, void *state);
/* At enable and disable: on coll API 3.0.0 (Open MPI 6.0), where each
 * module installs its own functions, put ours into the communicator's
 * barrier slots (saving what was there), and put that back where the slot
 * is still ours. No-ops on 4.1 and 5.0, whose base copies them itself. */
void  hwb_module_install(mca_coll_base_module_t *module, struct ompi_communicator_t *comm);
void  hwb_module_uninstall(mca_coll_base_module_t *module, struct ompi_communicator_t *comm);
void *hwb_module_state(mca_coll_base_module_t *m);
void  hwb_obj_retain(void *obj);
void  hwb_obj_release(void *obj);

/* --- communicator accessors --- */
int   hwb_comm_rank(struct ompi_communicator_t *comm);
int   hwb_comm_size(struct ompi_communicator_t *comm);
int   hwb_comm_is_inter(struct ompi_communicator_t *comm);
/* 1 when some member lives on another node (no per-peer state is created). */
int   hwb_comm_has_remote_peers(struct ompi_communicator_t *comm);
/* Ranks of the communicator on this node, this one included (any job's). */
int   hwb_comm_local_ranks(struct ompi_communicator_t *comm);
/* The communicator's context id on this process (ompi_comm_get_cid on 4.1,
 * ompi_comm_get_local_cid on 5.0). */
uint32_t hwb_comm_cid(struct ompi_communicator_t *comm);
const char *hwb_comm_name(struct ompi_communicator_t *comm);
/* The barrier (and its module) installed before ours: our fallback. */
typedef int (*hwb_barrier_fn)(struct ompi_communicator_t *, mca_coll_base_module_t *);
void  hwb_comm_current_barrier(struct ompi_communicator_t *comm, hwb_barrier_fn *fn,
                               mca_coll_base_module_t **module);

/* --- facts --- */
/* The Open MPI release this process runs (from MPI_Get_library_version,
 * callable before MPI_Init; in a process without the MPI layer, 6.0's
 * ompi_info, from coll/basic's version block): 0 and *major/minor/release
 * set, or -1 when it cannot tell. */
int hwb_runtime_version(int *major, int *minor, int *release);

/* Whether the job asked Open MPI to yield when idle (mpi_yield_when_idle,
 * which mpirun also sets when it oversubscribes). Read from the MCA
 * variable: MPI_Init applies it to opal_progress only after MPI_COMM_WORLD
 * has chosen its collectives. */
int hwb_mpi_yield_when_idle(void);
/* 1 when opal_progress yields after a pass that found nothing to do
 * (opal_progress_yield_when_idle, or what it was before
 * hwb_progress_unyielding turned it off for its turn): two loads. */
int hwb_progress_yields(void);
/* 1 when MPI_Init granted MPI_THREAD_MULTIPLE (ompi_mpi_thread_multiple,
 * set before MPI_COMM_WORLD chooses its collectives). */
int hwb_mpi_thread_multiple(void);
/* Ranks of this job on this node, this one included
 * (opal_process_info.num_local_peers + 1: what the launcher told Open MPI
 * through PMIx, under mpirun and direct launch alike; int32 on 4.1, uint32
 * on 5.0 and 6.0). Set by the runtime's init, before any communicator
 * chooses its collectives. One launcher case reads one too many on 5.0
 * and 6.0: a PMIx server that gives a local size but no list of local
 * peers makes Open MPI assume 1 peer (ompi_rte_init); prte and the
 * singleton runtime give both. */
int hwb_job_local_ranks(void);
/* This process's rank among its job's ranks on this node, 0 first
 * (opal_process_info.my_local_rank, from PMIx; int32 on 4.1, uint16 on
 * 5.0 and 6.0, where a singleton gets 0). */
int hwb_job_local_rank(void);
/* This process's binding as Open MPI's runtime gives it (its locality
 * string), malloc'ed, or NULL when it has none; free with hwb_free. */
char *hwb_locality_string(void);
/* The CPUs the runtime bound this process to (a list such as "0-3,8"),
 * malloc'ed, or NULL; free with hwb_free. */
char *hwb_cpuset_string(void);
/* One turn of opal_progress without the engine's own yield after an idle
 * turn, for a caller that tells idle turns from busy ones by their duration
 * (4.1, whose opal_progress returns nothing; the yield would make every
 * turn of an oversubscribed rank look long). Returns 1 when the engine
 * would have yielded after an idle turn (the caller then yields after one),
 * 0 when not, and -1 when the turn ran as usual: with MPI_THREAD_MULTIPLE,
 * because the switch is process-wide and another thread may be turning
 * progress. */
int hwb_progress_unyielding(void);
/* The value of the coll framework's selection variable (`--mca coll ...`),
 * or NULL when unset. */
const char *hwb_coll_selection(void);

/* The component path Open MPI searches for mca_<framework>_<name>.so
 * files (mca_base_component_path), or NULL. */
const char *hwb_component_path(void);
/* The name of the i-th coll component built into Open MPI (0-based), or
 * NULL past the last: 5.0 and 6.0 build theirs into libmpi. */
const char *hwb_coll_static_component(int i);

/* --- messages --- */
/* Adds a directory to the help system's search path. */
void hwb_show_help_add_dir(const char *dir);
/* The message of `topic` in help-coll-hwbarr.txt, rendered by Open MPI's
 * help system with `summary` as its %s and the error header, malloc'ed
 * (free with hwb_free), or NULL. */
char *hwb_help_string(const char *topic, const char *summary);
void hwb_free(void *p);
/* An Open MPI output stream to stderr at `verbosity`. */
int hwb_output_open(int verbosity);
/* opal_output(stream, "%s", line). */
void hwb_output(int stream, const char *line);

/* --- MCA parameters --- */
/* Registers coll_hwbarr_<name> as an int MCA enum whose values are
 * 0..count-1 named by `names`; Open MPI rejects (and reports) any other
 * value. Returns the variable index or an Open MPI error. */
int hwb_register_enum_param(const mca_base_component_t *component, const char *name,
                            const char *description, int info_level, const char *const *names,
                            int count, int *storage);

/* --- MPI_T performance variable --- */
/* Registers coll_hwbarr_<name>: a read-only, continuous unsigned long long
 * counter bound to a communicator, read through `get` and told of handle
 * binds through `notify`. Returns its index or an Open MPI error. */
typedef int (*hwb_pvar_get_fn)(const void *pvar, void *value, void *comm);
typedef int (*hwb_pvar_notify_fn)(void *pvar, int event, void *comm, int *count);
int hwb_pvar_register_comm_counter(const mca_base_component_t *component, const char *name,
                                   const char *description, hwb_pvar_get_fn get,
                                   hwb_pvar_notify_fn notify);
/* 1 when `event` is a handle being bound (MCA_BASE_PVAR_HANDLE_BIND). */
int hwb_pvar_event_is_bind(int event);

/* --- point-to-point engine (MCA_PML_CALL) with MPI_BYTE buffers --- */
int hwb_pml_send(const void *buf, size_t len, int dst, int tag, struct ompi_communicator_t *comm);
int hwb_pml_recv(void *buf, size_t len, int src, int tag, struct ompi_communicator_t *comm);
int hwb_pml_isend(const void *buf, size_t len, int dst, int tag, struct ompi_communicator_t *comm,
                  struct ompi_request_t **req);
int hwb_pml_irecv(void *buf, size_t len, int src, int tag, struct ompi_communicator_t *comm,
                  struct ompi_request_t **req);
/* MPI_Iprobe from any source on `tag` (internal tags too): 1 and the
 * message's source and size when one is waiting, else 0. */
int hwb_pml_iprobe(int tag, struct ompi_communicator_t *comm, int *src, size_t *bytes);
/* Takes the tag the next non-blocking collective on `comm` would get
 * (ompi_coll_base_nbc_reserve_tags, as libnbc does) and returns it. */
int hwb_nbc_reserve_tag(struct ompi_communicator_t *comm);

/* --- requests for MPI_Ibarrier and the persistent barrier --- */
typedef int (*hwb_start_fn)(size_t count, struct ompi_request_t **reqs);
typedef int (*hwb_free_fn)(struct ompi_request_t **req);
typedef int (*hwb_cancel_fn)(struct ompi_request_t *req, int complete);
/* A collective request (inactive if persistent, pending otherwise) whose
 * `owner` is handed back by hwb_request_owner. */
struct ompi_request_t *hwb_request_new(struct ompi_communicator_t *comm, int persistent, void *owner,
                                       hwb_start_fn start, hwb_free_fn free_fn, hwb_cancel_fn cancel);
void *hwb_request_owner(struct ompi_request_t *req);
int hwb_request_is_persistent(struct ompi_request_t *req);
/* Whether the request is complete (an inactive persistent one is). */
int hwb_request_is_complete(struct ompi_request_t *req);
/* MPI_Start: mark active and pending. */
void hwb_request_activate(struct ompi_request_t *req);
/* MPI-complete it (wakes a waiter), with an MPI error code. */
void hwb_request_complete(struct ompi_request_t *req, int error);
/* MPI-complete it inside the call that starts it (MPI_Start, MPI_Ibarrier),
 * before the caller has it back: nobody can be waiting on it yet, so there is
 * no waiter to wake and no atomic exchange to make. */
void hwb_request_complete_unwaited(struct ompi_request_t *req, int error);
/* Take back a completed non-persistent request for reuse (kept by hwbarr,
 * unknown to MPI until reissued). */
void hwb_request_retire(struct ompi_request_t *req);
/* Reissue a retired request as a fresh, pending non-persistent one. */
void hwb_request_reissue(struct ompi_request_t *req);
/* Set the caller's handle to MPI_REQUEST_NULL. */
void hwb_request_forget(struct ompi_request_t **req);
/* Release it (from req_free) and set *req to MPI_REQUEST_NULL. */
void hwb_request_release(struct ompi_request_t **req);
/* A point-to-point request: 1 (and freed, *req = NULL) once complete,
 * without turning progress; *error gets its MPI error. With fault
 * tolerance on, also once Open MPI has failed it (its peer failed, or the
 * communicator's collectives were revoked): cancelled and complete, with
 * that error. 0 while pending. */
int hwb_request_done(struct ompi_request_t **req, int *error);

#endif
