/* Kiln runtime: the public C API for embedding compiled Kiln artifacts (.kiln files).
 *
 * Plain C (C99 and later, also valid C++): no C++ types and no exceptions cross this API. Link
 * the kiln_runtime library only; it never pulls in the compiler (frontend, passes, codegen).
 *
 * ERRORS. Every function that can fail returns a kiln_status. On failure it also stores a
 * human-readable message in a per-thread slot, read with kiln_last_error_message(); the message
 * names what was wrong (the input, what was expected and what was given, the device and why).
 * The slot works like errno: it is overwritten by the next failing call on the same thread and
 * left alone by successful calls. NULL handles, NULL out-pointers and bad arguments give
 * KILN_INVALID_ARGUMENT, never a crash.
 *
 * OBJECTS AND LIFETIMES. All handles are opaque and created/destroyed by this API:
 *  - kiln_artifact: a loaded artifact, immutable after loading. It may be shared by any number
 *    of sessions on any threads. Sessions keep what they need alive, so an artifact may be
 *    destroyed while sessions created from it are still in use.
 *  - kiln_session: runs one artifact on one device. It owns its memory arena, its stream/queue
 *    and its results. A session is NOT thread-safe for concurrent use (calls on one session are
 *    serialized internally, but interleaving them from several threads is meaningless): use one
 *    session per thread. Sessions on one artifact may run concurrently from many threads.
 *  - kiln_buffer: device memory allocated on a session's device, usable as an input or output
 *    binding of any session on that same device, in place (no copy). A buffer may be destroyed
 *    while still bound: the memory lives until the binding is replaced or the session destroyed.
 *  - kiln_event: an asynchronous run in flight; wait on it, then destroy it.
 * Destroy functions accept NULL and do nothing.
 *
 * DEVICES. Ids look like "cuda:0", "vulkan:1", "opencl:0" or "reference" (the built-in reference
 * interpreter). A NULL or "" id means the default device: the fastest available device whose
 * driver the artifact has kernels for, in this order: a CUDA GPU, then a discrete Vulkan or
 * OpenCL GPU, then an integrated GPU, then CPU implementations (lavapipe, PoCL). When no present
 * device has kernels in the artifact (e.g. a CUDA-only artifact on a machine without CUDA),
 * kiln_session_create fails with KILN_UNAVAILABLE naming the artifact's targets and the devices
 * present: it never falls back to the reference interpreter silently. The reference interpreter
 * runs any artifact when asked for by id ("reference"), and is the default only for an
 * artifact compiled for no target. Drivers load their API at run time, so the library works on
 * machines without CUDA, Vulkan or OpenCL and lists those drivers as unavailable (with why).
 * If the environment variable KILN_REQUIRE_DRIVERS holds a comma list of driver names (e.g.
 * "vulkan,opencl"), a listed driver without a usable device makes kiln_device_count and
 * kiln_session_create fail with KILN_UNAVAILABLE naming the driver and the reason.
 *
 * CUDA. A CUDA session captures its whole launch sequence into a CUDA graph (on its second run
 * with the same bound buffers and symbol sizes) and replays it on later runs; binding other
 * buffers or sizes re-captures it. The device option cuda.graphs=off
 * (kiln_session_create_with_options), or else the environment variable KILN_CUDA_GRAPHS=0 set
 * before the device is first opened by a session, turns graphs off (kernels are launched one
 * by one).
 * Matrix products run through cuBLASLt when libcublasLt.so.13 or .12 is installed, else as
 * generated kernels; KILN_CUBLASLT=0 (set before the first run) forces the generated kernels.
 * CUDA errors carry the CUDA error name (e.g. CUDA_ERROR_OUT_OF_MEMORY, as KILN_OUT_OF_MEMORY).
 */
#ifndef KILN_RUNTIME_H_
#define KILN_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The API level of this header: raised whenever functions, enum values or option fields are
 * added, so code can test for them at compile time. */
#define KILN_RUNTIME_API_VERSION 4
/* The ABI generation: the N of the shared library's SONAME, libkiln_runtime.so.N. Raised only by
 * a change that breaks programs built against an older header (a removed or changed function,
 * a renumbered enum value, a reordered struct). */
#define KILN_RUNTIME_ABI_VERSION 1

typedef enum kiln_status {
  KILN_OK = 0,
  KILN_INVALID_ARGUMENT = 1, /* a bad argument, handle, name, dtype or shape */
  KILN_NOT_FOUND = 2,        /* a named thing (file, input, output, device) does not exist */
  KILN_UNSUPPORTED = 3,      /* valid, but this device or build cannot do it */
  KILN_CORRUPT = 4,          /* the artifact failed validation (corrupted, truncated, foreign) */
  KILN_OUT_OF_MEMORY = 5,    /* host or device memory exhausted */
  KILN_UNAVAILABLE = 6,      /* a driver or device is not present */
  KILN_INTERNAL = 7,         /* a bug in Kiln */
  KILN_UNTRUSTED = 8         /* (API level 3) the artifact is not signed by a trusted key */
} kiln_status;

/* Element types, as spelled in the .graph format. bool is one byte (0 or 1). The 8-bit floats
 * are ONNX's FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2 and FLOAT8E5M2FNUZ, one byte each. */
typedef enum kiln_dtype {
  KILN_DTYPE_F32 = 0,
  KILN_DTYPE_F16 = 1,
  KILN_DTYPE_BF16 = 2,
  KILN_DTYPE_I64 = 3,
  KILN_DTYPE_I32 = 4,
  KILN_DTYPE_I8 = 5,
  KILN_DTYPE_U8 = 6,
  KILN_DTYPE_BOOL = 7,
  /* (API level 4) */
  KILN_DTYPE_I16 = 8,
  KILN_DTYPE_U16 = 9,
  KILN_DTYPE_U32 = 10,
  KILN_DTYPE_F64 = 11,
  KILN_DTYPE_F8E4M3FN = 12,
  KILN_DTYPE_F8E4M3FNUZ = 13,
  KILN_DTYPE_F8E5M2 = 14,
  KILN_DTYPE_F8E5M2FNUZ = 15
} kiln_dtype;

typedef enum kiln_device_type {
  KILN_DEVICE_DISCRETE_GPU = 0,
  KILN_DEVICE_INTEGRATED_GPU = 1,
  KILN_DEVICE_CPU = 2
} kiln_device_type;

typedef struct kiln_artifact kiln_artifact;
typedef struct kiln_session kiln_session;
typedef struct kiln_buffer kiln_buffer;
typedef struct kiln_event kiln_event;

/* ---- Errors and versions ------------------------------------------------------------------ */

/* "OK", "INVALID_ARGUMENT", ...; "UNKNOWN" for a value outside the enum. Static storage. */
const char* kiln_status_name(kiln_status status);
/* The message of the last failing call on this thread ("" if none). Valid until the next
 * failing call on this thread. */
const char* kiln_last_error_message(void);
/* The library version, e.g. "0.1.0". Static storage. */
const char* kiln_runtime_version(void);
/* The artifact format versions this library reads, oldest and newest; the newest is the one the
 * kilnc of the same release writes. Either pointer may be NULL. */
void kiln_artifact_format_versions(uint32_t* oldest, uint32_t* newest);
/* "f32", "f16", ...; NULL for a value outside the enum. Static storage. */
const char* kiln_dtype_name(kiln_dtype dtype);
/* Bytes per element; 0 for a value outside the enum. */
size_t kiln_dtype_size(kiln_dtype dtype);

/* ---- Logging ------------------------------------------------------------------------------ */

typedef enum kiln_log_level {
  KILN_LOG_ERROR = 0,
  KILN_LOG_WARNING = 1, /* a fast path fell back (e.g. a CUDA graph capture failed) */
  KILN_LOG_INFO = 2,    /* the default device chosen, sessions opened, libraries not found */
  KILN_LOG_DEBUG = 3
} kiln_log_level;

/* Receives the runtime's log messages (not the errors of calls: those are statuses). Called from
 * whichever thread logs, never from two at once; `message` is valid during the call only. */
typedef void (*kiln_log_fn)(void* user_data, kiln_log_level level, const char* message);

/* Process-wide: sends messages of `max_level` and more severe to `fn` from now on. A NULL `fn`
 * restores the default: messages up to the level named by the environment variable
 * KILN_LOG_LEVEL (error, warning, info, debug or off; default warning) go to stderr. */
void kiln_set_log_callback(kiln_log_fn fn, void* user_data, kiln_log_level max_level);

/* ---- Devices ------------------------------------------------------------------------------ */

/* One device. The strings are owned by the library and valid until the process exits. */
typedef struct kiln_device_info {
  const char* id;          /* "vulkan:0", "reference", ... */
  const char* driver;      /* "vulkan", "opencl", "cuda", "reference" */
  kiln_device_type type;
  const char* type_name;   /* "gpu", "integrated-gpu", "cpu" */
  const char* description; /* e.g. "llvmpipe (LLVM 15.0.6, 256 bits)" */
  int priority;            /* higher is preferred as the default device */
} kiln_device_info;

/* Devices are enumerated once per process (at the first call of any device or session
 * function) and listed fastest first. kiln_device_count fails with KILN_UNAVAILABLE when a
 * driver named in KILN_REQUIRE_DRIVERS has no usable device (checked at every call). */
kiln_status kiln_device_count(size_t* count);
kiln_status kiln_device_get_info(size_t index, kiln_device_info* info);
/* Drivers built into the library, with the reason each one has no device ("" when usable).
 * Strings valid until the process exits. */
kiln_status kiln_driver_count(size_t* count);
kiln_status kiln_driver_get_info(size_t index, const char** name, const char** unavailable_reason);

/* ---- Artifacts ---------------------------------------------------------------------------- */

/* Loads and fully validates an artifact. A corrupted, truncated or foreign file is
 * KILN_CORRUPT, a newer format version KILN_INVALID_ARGUMENT, a missing file KILN_NOT_FOUND. */
kiln_status kiln_artifact_load_file(const char* path, kiln_artifact** out);
/* Same from memory. The bytes are COPIED: the caller may free `data` when this returns. */
kiln_status kiln_artifact_load_memory(const void* data, size_t size, kiln_artifact** out);
void kiln_artifact_destroy(kiln_artifact* artifact);

/* (API level 3) How much to trust an artifact. An artifact is code that runs on the device (see
 * docs/security.md): a service that loads artifacts it did not build names the public keys of the
 * builders it trusts, and only artifacts they signed (kilnc --sign KEY) load; an unsigned one, one
 * signed by another key, or one changed after signing fails with KILN_UNTRUSTED before anything
 * else of it is parsed. Growable like kiln_session_options: set struct_size (or call
 * kiln_artifact_options_init, which zeroes every field). */
typedef struct kiln_artifact_options {
  size_t struct_size;
  /* Trusted public keys, each the text of a kilnc .pub file ("kiln-ed25519-public-key <hex>") or
   * its 64 hexadecimal digits. None (count 0): signatures are not checked. */
  const char* const* trusted_keys;
  size_t trusted_key_count;
} kiln_artifact_options;
void kiln_artifact_options_init(kiln_artifact_options* options);
/* kiln_artifact_load_file / _memory with options (NULL: the defaults). */
kiln_status kiln_artifact_load_file_ex(const char* path, const kiln_artifact_options* options, kiln_artifact** out);
kiln_status kiln_artifact_load_memory_ex(const void* data, size_t size, const kiln_artifact_options* options,
                                         kiln_artifact** out);
/* (API level 3) The public key (64 hex digits) that the artifact's header names as its signer, or
 * NULL when it is unsigned; `verified` (may be NULL) is 1 when the artifact was loaded with trusted
 * keys, so that the signature was checked, else 0. The string is valid until the artifact is
 * destroyed. */
kiln_status kiln_artifact_signer(const kiln_artifact* artifact, const char** public_key_hex, int* verified);

/* One tensor of the artifact's signature. All pointers are owned by the artifact and valid
 * until it is destroyed. dims[i] is the static size, or -1 when dimension i is symbolic, in
 * which case dim_symbols[i] is its symbol name ("N"); dim_symbols[i] is NULL for static dims. */
typedef struct kiln_tensor_info {
  const char* name;
  kiln_dtype dtype;
  size_t rank;
  const int64_t* dims;
  const char* const* dim_symbols;
} kiln_tensor_info;

kiln_status kiln_artifact_input_count(const kiln_artifact* artifact, size_t* count);
kiln_status kiln_artifact_input_info(const kiln_artifact* artifact, size_t index, kiln_tensor_info* info);
kiln_status kiln_artifact_output_count(const kiln_artifact* artifact, size_t* count);
kiln_status kiln_artifact_output_info(const kiln_artifact* artifact, size_t index, kiln_tensor_info* info);
/* The targets the artifact has compiled kernels for ("vulkan", "opencl", "cuda"). The
 * reference device needs none. Strings valid until the artifact is destroyed. */
kiln_status kiln_artifact_target_count(const kiln_artifact* artifact, size_t* count);
kiln_status kiln_artifact_target(const kiln_artifact* artifact, size_t index, const char** target);
/* Whether `device_id` (NULL or "" = default) can run the artifact: writes 1 or 0 to `can_run`
 * and, when 0, a reason into the thread's error message slot. Does not open the device. */
kiln_status kiln_artifact_supports_device(const kiln_artifact* artifact, const char* device_id,
                                          int* can_run);
/* The artifact's format version, and the compiler that wrote it (e.g. "kilnc 0.1.0"; valid until
 * the artifact is destroyed). */
kiln_status kiln_artifact_format_version(const kiln_artifact* artifact, uint32_t* version);
kiln_status kiln_artifact_producer(const kiln_artifact* artifact, const char** producer);

/* ---- Sessions ----------------------------------------------------------------------------- */

/* Creates a session of `artifact` on `device_id` (NULL or "" = the default device; see above).
 * Fails with KILN_NOT_FOUND for an unknown id (listing the ids), KILN_UNSUPPORTED when the
 * artifact has no kernels for the device's API or needs a feature the device lacks. */
kiln_status kiln_session_create(kiln_artifact* artifact, const char* device_id, kiln_session** out);
/* One device option, "<driver>.<option>" = value, e.g. {"cuda.graphs", "off"}. */
typedef struct kiln_device_option {
  const char* key;
  const char* value;
} kiln_device_option;
/* kiln_session_create with `count` device options (`options` may be NULL when count is 0),
 * applied when the device is opened. An option is read only by the driver it names (others
 * ignore it), so the same options can be given for any device. Options:
 *   cuda.graphs = on | off   capture and replay CUDA graphs (default: on, see CUDA above)
 *   cpu.threads = N          threads the cpu device runs a kernel on, 0 to 1024 (default 0: one
 *                            per hardware thread)
 * The first cpu device opened in a process sets GOMP_SPINCOUNT=10000 in its environment (idle
 * OpenMP threads of oneDNN spin briefly, then sleep) unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is
 * set or OpenMP has already started. It adds the variable without setenv and never frees the
 * environment it replaces, so threads reading the environment meanwhile are safe; a setenv on
 * another thread at that very moment may undo the addition (set either variable to keep Kiln
 * from changing the environment at all).
 * Sessions with the same device id and options share one opened device; other options open
 * the device again. KILN_INVALID_ARGUMENT for an option naming no driver, one its driver does
 * not have, or a value it cannot take. */
kiln_status kiln_session_create_with_options(kiln_artifact* artifact, const char* device_id,
                                             const kiln_device_option* options, size_t count,
                                             kiln_session** out);
/* Device memory supplied by the application for a session's buffers (see kiln_session_options).
 * allocate: `bytes` (at least 1) of memory on the session's device; writes its native handle to
 * *native (CUDA: a CUdeviceptr cast to void*; the reference and cpu devices: a host pointer)
 * and returns 0, or returns non-zero when it cannot (the Kiln call that needed it then fails
 * with KILN_OUT_OF_MEMORY). deallocate: gives back what allocate returned, with the same size.
 * Both are called from the thread of the Kiln call that allocates or frees (kiln_session_run,
 * kiln_buffer_create, kiln_session_destroy, ...), possibly from several threads at once. */
typedef struct kiln_allocator {
  void* user_data;
  int (*allocate)(void* user_data, size_t bytes, void** native);
  void (*deallocate)(void* user_data, void* native, size_t bytes);
} kiln_allocator;

/* Options of kiln_session_create_ex. The struct grows at its end in later releases: set
 * struct_size to sizeof(kiln_session_options) (kiln_session_options_init does it and sets every
 * field to its default), so that a library newer than the caller's header reads only the fields
 * the caller knows, and an older one refuses a set field it does not know. */
typedef struct kiln_session_options {
  size_t struct_size;
  /* The device (NULL or "": the default device, as kiln_session_create). */
  const char* device_id;
  /* Device options, as kiln_session_create_with_options (count 0: none). */
  const kiln_device_option* device_options;
  size_t device_option_count;
  /* Host threads for the work a device runs on the host: the reference interpreter's matrix
   * products and convolutions (the results do not depend on it). 0 (the default) or 1: all on
   * the calling thread; N: up to N threads; KILN_THREADS_ALL: one per hardware thread. Devices
   * that compute on a GPU ignore it. */
  uint32_t threads;
  /* The application's CUDA stream (a CUstream cast to void*) on which the session enqueues its
   * work, so that it is ordered with the application's own work on that stream; NULL: a stream
   * of the session's own. Kiln never destroys it; it must outlive the session. Runs still wait
   * for their results (kiln_session_run waits for the stream). CUDA devices only: elsewhere
   * KILN_UNSUPPORTED. */
  void* cuda_stream;
  /* Device memory for the session's buffers: the inputs it uploads, the outputs it keeps, the
   * memory plan's arena and kiln_buffer_create's buffers; NULL: the device's own allocations.
   * The artifact's weights are not the session's (the sessions of one artifact on one device
   * share them) and stay the device's. Copied at creation; the functions and user_data must stay
   * valid until the session and its buffers are destroyed. CUDA and reference devices only:
   * elsewhere KILN_UNSUPPORTED. */
  const kiln_allocator* allocator;
} kiln_session_options;

#define KILN_THREADS_ALL UINT32_MAX

/* Sets struct_size and every field to its default. */
void kiln_session_options_init(kiln_session_options* options);
/* kiln_session_create with options (NULL: all defaults). KILN_INVALID_ARGUMENT for a
 * struct_size below the first version's or a set field this library does not know. */
kiln_status kiln_session_create_ex(kiln_artifact* artifact, const kiln_session_options* options,
                                   kiln_session** out);
/* Waits for a run in flight, then frees the session (outstanding events stay valid). */
void kiln_session_destroy(kiln_session* session);
/* The id of the device the session runs on; valid while the session lives. */
kiln_status kiln_session_device_id(const kiln_session* session, const char** id);

/* Binds input `name` to host memory holding a `dtype` tensor of shape dims[0..rank) in C order;
 * `bytes` must equal its size. The bytes are COPIED during this call. A wrong name is
 * KILN_NOT_FOUND; a wrong dtype, rank, static dimension or byte count KILN_INVALID_ARGUMENT. */
kiln_status kiln_session_set_input(kiln_session* session, const char* name, kiln_dtype dtype,
                                   const int64_t* dims, size_t rank, const void* data, size_t bytes);
/* Binds input `name` to a device buffer of this session's device, used in place by every run
 * (the buffer must hold exactly the tensor's bytes). */
kiln_status kiln_session_set_input_buffer(kiln_session* session, const char* name, kiln_dtype dtype,
                                          const int64_t* dims, size_t rank, kiln_buffer* buffer);
/* Each run writes output `name` into caller memory `data` (capacity checked at run). The memory
 * is BORROWED: keep it valid until the binding is replaced or the session destroyed, and do not
 * read it while an asynchronous run is in flight. */
kiln_status kiln_session_set_output_host(kiln_session* session, const char* name, void* data,
                                         size_t capacity);
/* Each run writes output `name` in place into a device buffer of this session's device (of
 * exactly the output's byte size). */
kiln_status kiln_session_set_output_buffer(kiln_session* session, const char* name, kiln_buffer* buffer);
/* Back to the default: the output is kept by the session (kiln_session_get_output). */
kiln_status kiln_session_reset_output(kiln_session* session, const char* name);

/* Runs once with the bound inputs and waits for it. */
kiln_status kiln_session_run(kiln_session* session);
/* Starts a run and returns at once with an event. Until kiln_event_wait returns, the session
 * must not be used (calls on it fail with KILN_INVALID_ARGUMENT) and bound buffers and output
 * memory must not be touched. Host inputs were already copied when this returns. */
kiln_status kiln_session_run_async(kiln_session* session, kiln_event** event);
/* Waits for the run; returns its status (again on later calls). */
kiln_status kiln_event_wait(kiln_event* event);
/* Waits if not yet waited, then frees the event. */
void kiln_event_destroy(kiln_event* event);

/* After a successful run: output `name`'s shape (rank written to *rank; dims written when
 * max_rank >= rank, otherwise KILN_INVALID_ARGUMENT). */
kiln_status kiln_session_output_shape(const kiln_session* session, const char* name, int64_t* dims,
                                      size_t max_rank, size_t* rank);
/* After a successful run: the bytes of an output with the default binding, owned by the
 * session and valid until the next run, binding change or destroy. */
kiln_status kiln_session_get_output(const kiln_session* session, const char* name, const void** data,
                                    size_t* bytes);
/* Copies an output with the default binding into `dst` (capacity must cover its bytes). */
kiln_status kiln_session_read_output(const kiln_session* session, const char* name, void* dst,
                                     size_t capacity);

/* ---- Profiling ---------------------------------------------------------------------------- */

typedef struct kiln_kernel_time {
  const char* name;      /* provenance name, e.g. "fused_mul_add_tanh_3" */
  const char* kind;      /* "elementwise", "reduction", ... */
  uint32_t kernel_index; /* index into the artifact's kernels; UINT32_MAX for other work */
  double seconds;
} kiln_kernel_time;

/* With profiling on, each run records per-kernel times (device timers where the API has them,
 * else host wall time; kiln_session_profile_clock says which). Strings valid until next run. */
kiln_status kiln_session_set_profiling(kiln_session* session, int enabled);
kiln_status kiln_session_profile_count(const kiln_session* session, size_t* count);
kiln_status kiln_session_profile_entry(const kiln_session* session, size_t index, kiln_kernel_time* out);
kiln_status kiln_session_profile_clock(const kiln_session* session, const char** clock);

/* ---- Device buffers ----------------------------------------------------------------------- */

/* Allocates `bytes` on the session's device (KILN_OUT_OF_MEMORY when it cannot). */
kiln_status kiln_buffer_create(kiln_session* session, size_t bytes, kiln_buffer** out);
/* Wraps `bytes` of memory that the application already holds on the session's device, so that
 * kiln_session_set_input_buffer / set_output_buffer use it in place, with no copy (e.g. a
 * tensor of another framework). `native` is the device API's handle: on a CUDA device a
 * CUdeviceptr cast to void*. The memory stays the application's: Kiln never frees it, and it
 * must stay valid until the kiln_buffer is destroyed and no run that uses it is in flight; the
 * application orders its own work on the memory against Kiln's runs (kiln_event_wait).
 * KILN_INVALID_ARGUMENT when the pointer is not `bytes` of this device's memory,
 * KILN_UNSUPPORTED on devices whose driver cannot wrap memory (OpenCL, Vulkan). On the reference
 * device, whose memory is host memory, `native` is a host pointer. */
kiln_status kiln_buffer_wrap_native(kiln_session* session, void* native, size_t bytes, kiln_buffer** out);
void kiln_buffer_destroy(kiln_buffer* buffer);
kiln_status kiln_buffer_size(const kiln_buffer* buffer, size_t* bytes);
/* Synchronous copies; [offset, offset + bytes) must lie inside the buffer. */
kiln_status kiln_buffer_write(kiln_buffer* buffer, size_t offset, const void* data, size_t bytes);
kiln_status kiln_buffer_read(const kiln_buffer* buffer, size_t offset, void* data, size_t bytes);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* KILN_RUNTIME_H_ */
