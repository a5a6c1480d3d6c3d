/* Headers bindgen reads to generate hwbarr's FFI layer (into OUT_DIR).
 * They are the headers of the Open MPI we build for (4.1, 5.0 or 6.0), as
 * installed on the machine; nothing of Open MPI is copied into this
 * repository. */
#include "ompi_config.h"
#include "ompi/mca/coll/coll.h"
#include "ompi/mca/coll/base/coll_tags.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/runtime/opal_progress.h"
#include "ompi-headers/hwbarr_shim.h"
