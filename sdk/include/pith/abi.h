/* pith/abi.h: the complete guest <-> host ABI of pith inferlets (import module "pith").
 *
 * An inferlet is a WebAssembly module (wasm32, WASI preview 1) that imports the functions below
 * from module "pith". This header is the single source of truth for that boundary: the guest
 * SDK includes it to declare the imports; the host includes it for the status codes, handle
 * types and struct layouts, and mirrors every function in one file per capability (section
 * "args" <-> src/runtime/api/args.cpp, and so on).
 *
 * Conventions (all functions):
 *  - Names are pith_<object>_<verb>; the Wasm import name is the C name without "pith_".
 *  - Every function returns a pith_status_t (0 = PITH_OK) unless documented otherwise; outputs go
 *    through pointers. On error, outputs are left untouched unless stated otherwise.
 *  - Integers are sized; pointers are guest addresses (32 bit). A pointer/length pair that does
 *    not lie inside the instance's linear memory yields PITH_ERR_BAD_POINTER, never a crash.
 *  - Variable-length outputs use (buf, cap, *len): *len always receives the full length; if
 *    cap < *len the first cap bytes are written and PITH_ERR_BUFFER_TOO_SMALL is returned, so a
 *    guest can size a buffer with cap = 0 and call again.
 *  - Handles are small per-instance integers; 0 is never a valid handle. A guest can only name its
 *    own handles: a handle of another instance is simply PITH_ERR_BAD_HANDLE.
 *  - Calls that need the model (or the network) are asynchronous: they return a pith_future_t
 *    immediately. pith_future_wait parks the calling instance (its fiber) until the result is
 *    ready while the host thread runs other instances; pith_future_poll never blocks.
 *  - Calls that only enqueue work on a command queue (alloc, forward, copy, mask ...) return as
 *    soon as the command is queued; the control layer executes queued commands in order, so a
 *    later get_next_dist on the same queue sees the effect of an earlier forward. Errors found at
 *    execution time are reported by the next future of that queue (or by pith_queue_synchronize).
 *
 * Struct layouts below are the wasm32 layouts: every field is 4 bytes (pointers are guest
 * addresses), naturally aligned, no padding. PITH_GUEST_PTR(T) is T* in the guest and uint32_t
 * on the host.
 */
#ifndef PITH_ABI_H_
#define PITH_ABI_H_

#include <stdint.h>

/* The ABI is laid out by hand (one import macro + declaration per entry): not reformatted. */
/* clang-format off */
#ifdef __cplusplus
extern "C" {
#endif

#define PITH_ABI_VERSION 1u

#if defined(__wasm__)
#define PITH_GUEST_PTR(T) T*
#define PITH_IMPORT(name) __attribute__((import_module("pith"), import_name(#name)))
#else
#define PITH_GUEST_PTR(T) uint32_t
#define PITH_IMPORT(name)
#endif

/* ---- status codes ------------------------------------------------------------------------ */

typedef int32_t pith_status_t;
enum {
  PITH_OK = 0,
  PITH_ERR_BAD_HANDLE = 1,         /* handle unknown to this instance, or of the wrong kind */
  PITH_ERR_BAD_POINTER = 2,        /* pointer/length outside the instance's linear memory */
  PITH_ERR_BAD_ARGUMENT = 3,       /* value out of range (index, count, priority, ...) */
  PITH_ERR_BUFFER_TOO_SMALL = 4,   /* output truncated; *len holds the full length */
  PITH_ERR_NOT_FOUND = 5,          /* key, argument index, model or export name does not exist */
  PITH_ERR_PENDING = 6,            /* the future is not ready yet (poll, result_read) */
  PITH_ERR_OUT_OF_KV_PAGES = 7,    /* the KV-page quota or the pool is exhausted */
  PITH_ERR_OUT_OF_EMBEDS = 8,      /* the embedding-slot quota or the pool is exhausted */
  PITH_ERR_LIMIT = 9,              /* a per-instance limit (handles, queue length, message size or rate) */
  PITH_ERR_NO_MODEL = 10,          /* no model is attached to this runtime (e.g. run-local) */
  PITH_ERR_NOT_ENABLED = 11,       /* capability disabled in this server (e.g. HTTP) */
  PITH_ERR_UNSUPPORTED = 12,       /* the model lacks the trait this call needs */
  PITH_ERR_CLOSED = 13,            /* the channel/subscription was closed */
  PITH_ERR_CANCELLED = 14,         /* the future was dropped or the queue destroyed */
  PITH_ERR_ALREADY_EXISTS = 15,    /* export name already used */
  PITH_ERR_INTERNAL = 16,          /* host failure; the message is in the instance log */
  PITH_ERR_TIMEOUT = 17,           /* no complete answer in time (HTTP) */
  PITH_ERR_NETWORK = 18,           /* the peer could not be reached or broke off (HTTP) */
  PITH_ERR_BACKEND = 19,           /* the inference backend failed on a valid call (out of memory,
                                      device error); the message is in the instance log */
  PITH_ERR_OUT_OF_STATES = 20,     /* the recurrent-state pool or the instance's state quota is
                                      exhausted (hybrid models) */
};

/* ---- handles ----------------------------------------------------------------------------- */

typedef uint32_t pith_future_t;   /* result of an asynchronous call */
typedef uint32_t pith_model_t;    /* an opened model */
typedef uint32_t pith_queue_t;    /* a command queue on a model (ordering + priority domain) */
typedef uint32_t pith_kvpage_t;   /* a virtual KV-cache page (tokens_per_page slots) */
typedef uint32_t pith_emb_t;      /* a virtual embedding slot (one hidden-state vector) */
typedef uint32_t pith_adapter_t;  /* a LoRA-style adapter known to the model */
typedef uint32_t pith_sub_t;      /* a pub/sub subscription */
typedef uint32_t pith_state_t;    /* a recurrent state (hybrid models: one per sequence) */

/* ---- args and identity (api/args.cpp) ---------------------------------------------------- */

/* Number of launch arguments (argv[0] is the program name, as in WASI). */
PITH_IMPORT(arg_count) pith_status_t pith_arg_count(uint32_t* count);
/* Launch argument `index` (not NUL-terminated). PITH_ERR_NOT_FOUND past the end. */
PITH_IMPORT(arg_get) pith_status_t pith_arg_get(uint32_t index, char* buf, uint32_t cap,
                                                uint32_t* len);
/* This instance's id, unique within the server's lifetime. */
PITH_IMPORT(instance_id) pith_status_t pith_instance_id(uint64_t* id);
/* Monotonic time in nanoseconds. */
PITH_IMPORT(time_now) pith_status_t pith_time_now(uint64_t* ns);
/* Gives other instances on this thread a turn; returns when this one is scheduled again. */
PITH_IMPORT(yield) pith_status_t pith_yield(void);

/* ---- logging (api/log.cpp); stdout/stderr via WASI fd_write also become log lines ---------- */

enum { PITH_LOG_DEBUG = 0, PITH_LOG_INFO = 1, PITH_LOG_WARN = 2, PITH_LOG_ERROR = 3 };
PITH_IMPORT(log) pith_status_t pith_log(uint32_t level, const char* msg, uint32_t len);

/* ---- client messaging (api/messaging.cpp): Pie send / receive ----------------------------- */

/* Sends a message to the client that launched this instance (in order, reliably). */
PITH_IMPORT(msg_send) pith_status_t pith_msg_send(const void* data, uint32_t len);
/* Receives the next message from the client: the future's result is the message bytes.
 * PITH_ERR_CLOSED (as the future's status) once the client has closed its side. */
PITH_IMPORT(msg_receive) pith_status_t pith_msg_receive(pith_future_t* future);

/* ---- broadcast / subscribe between instances (api/pubsub.cpp) ------------------------------ */

/* Delivers a copy of data to every current subscription of topic (including the caller's). */
PITH_IMPORT(topic_broadcast) pith_status_t pith_topic_broadcast(const char* topic,
                                                                uint32_t topic_len,
                                                                const void* data, uint32_t len);
PITH_IMPORT(topic_subscribe) pith_status_t pith_topic_subscribe(const char* topic,
                                                                uint32_t topic_len,
                                                                pith_sub_t* sub);
/* The next message on the subscription: the future's result is the message bytes. */
PITH_IMPORT(topic_next) pith_status_t pith_topic_next(pith_sub_t sub, pith_future_t* future);
PITH_IMPORT(topic_unsubscribe) pith_status_t pith_topic_unsubscribe(pith_sub_t sub);

/* ---- futures (api/futures.cpp) ----------------------------------------------------------- */

/* *ready = 1 if the future has completed (successfully or not), else 0. Never blocks. */
PITH_IMPORT(future_poll) pith_status_t pith_future_poll(pith_future_t f, uint32_t* ready);
/* Parks the instance until f completes. Returns the operation's own status: PITH_OK, or the
 * error the operation ended with (e.g. PITH_ERR_OUT_OF_KV_PAGES, PITH_ERR_CLOSED). */
PITH_IMPORT(future_wait) pith_status_t pith_future_wait(pith_future_t f);
/* Parks until any of fs[0..n) completes; *index receives its position in fs and the return
 * value is that future's own status, as pith_future_wait would return it. */
PITH_IMPORT(future_wait_any) pith_status_t pith_future_wait_any(const pith_future_t* fs,
                                                                uint32_t n, uint32_t* index);
/* Result bytes of a completed future (PITH_ERR_PENDING if not completed). The layout of the
 * bytes is documented at the call that created the future. The result stays readable until
 * pith_future_drop. */
PITH_IMPORT(future_result) pith_status_t pith_future_result(pith_future_t f, void* buf,
                                                            uint32_t cap, uint32_t* len);
/* Releases the future (cancelling it if still pending). */
PITH_IMPORT(future_drop) pith_status_t pith_future_drop(pith_future_t f);

/* ---- persistent key-value store, shared by all inferlets of a server (api/store.cpp) ------- */

PITH_IMPORT(store_get) pith_status_t pith_store_get(const char* key, uint32_t key_len, void* buf,
                                                    uint32_t cap, uint32_t* len);
PITH_IMPORT(store_set) pith_status_t pith_store_set(const char* key, uint32_t key_len,
                                                    const void* value, uint32_t value_len);
PITH_IMPORT(store_delete) pith_status_t pith_store_delete(const char* key, uint32_t key_len);
PITH_IMPORT(store_exists) pith_status_t pith_store_exists(const char* key, uint32_t key_len,
                                                          uint32_t* exists);

/* ---- HTTP (api/http.cpp) ----------------------------------------------------------------
 * The server decides which hosts inferlets may reach (pith run/serve --inferlet-http-allow
 * HOST[:PORT],...); without that list every call returns PITH_ERR_NOT_ENABLED. Only http and https
 * URLs; redirects are not followed (a 3xx comes back as the result).
 * The call itself returns PITH_ERR_NOT_ENABLED (HTTP off, scheme or host not allowed: the instance
 * log says which host was refused), PITH_ERR_BAD_ARGUMENT (not a URL) or PITH_ERR_LIMIT (POST body
 * larger than the message size limit). The future then ends with PITH_OK and the result bytes
 * uint32 HTTP status code (little endian) followed by the response body, for every HTTP status
 * (404 and 500 too); or with PITH_ERR_TIMEOUT (the server's timeout, default 10 s), PITH_ERR_LIMIT
 * (body larger than the server's cap, default 4 MiB; never truncated) or PITH_ERR_NETWORK
 * (connect/TLS/protocol failure), the result bytes then holding a one-line description.
 * POST sends Content-Type application/json when the body starts with '{' or '[', else
 * application/octet-stream. Dropping the future or ending the instance aborts the request. */

PITH_IMPORT(http_get) pith_status_t pith_http_get(const char* url, uint32_t url_len,
                                                  pith_future_t* future);
PITH_IMPORT(http_post) pith_status_t pith_http_post(const char* url, uint32_t url_len,
                                                    const void* body, uint32_t body_len,
                                                    pith_future_t* future);

/* ---- models and traits (api/model.cpp) --------------------------------------------------- */

/* Names of the available models, '\n'-separated. */
PITH_IMPORT(model_list) pith_status_t pith_model_list(char* buf, uint32_t cap, uint32_t* len);
PITH_IMPORT(model_open) pith_status_t pith_model_open(const char* name, uint32_t name_len,
                                                      pith_model_t* model);
/* Traits the model supports, '\n'-separated: "tokenize", "forward", "forward_with_adapter",
 * "embed_img", "output_text", ... (paper Table 1 groups). */
PITH_IMPORT(model_traits) pith_status_t pith_model_traits(pith_model_t model, char* buf,
                                                          uint32_t cap, uint32_t* len);

typedef struct pith_model_info_t {
  uint32_t tokens_per_page;  /* KV slots per pith_kvpage_t */
  uint32_t vocab_size;
  uint32_t max_positions;    /* context length the model was trained for */
  uint32_t eos_token;        /* UINT32_MAX if none */
  uint32_t bos_token;        /* UINT32_MAX if none */
  uint32_t add_bos;          /* 1 if prompts should start with bos_token */
} pith_model_info_t;
PITH_IMPORT(model_info) pith_status_t pith_model_info(pith_model_t model, pith_model_info_t* info);

/* LoRA adapters the server has loaded (pith serve --lora NAME=PATH, POST /v1/load_lora_adapter);
 * model_traits lists each as "adapter=NAME". adapter_open gives a handle for forward_with_adapter,
 * forward_tokens' adapter field and queue_set_adapter; the adapter stays loaded while this
 * instance runs, even if the server unloads its name meanwhile. PITH_ERR_NOT_FOUND when no
 * adapter has that name. */
PITH_IMPORT(adapter_open) pith_status_t pith_adapter_open(pith_model_t model, const char* name,
                                                          uint32_t name_len,
                                                          pith_adapter_t* adapter);

/* ---- tokenizer (api/model.cpp); synchronous: they run on the host thread ------------------ */

PITH_IMPORT(tokenize) pith_status_t pith_tokenize(pith_model_t model, const char* text,
                                                  uint32_t text_len, uint32_t* tokens,
                                                  uint32_t cap, uint32_t* n);
PITH_IMPORT(detokenize) pith_status_t pith_detokenize(pith_model_t model, const uint32_t* tokens,
                                                      uint32_t n, char* buf, uint32_t cap,
                                                      uint32_t* len);
/* The vocabulary: for each token id in order, uint32 byte length then the bytes. */
PITH_IMPORT(vocab_get) pith_status_t pith_vocab_get(pith_model_t model, void* buf, uint32_t cap,
                                                    uint32_t* len);
/* Ids of the special tokens (control and unknown: BOS, EOS, "<|eot_id|>", "<unk>", ...), whose
 * vocab_get bytes are a name rather than text: grammar masks must never produce them. Writes up
 * to cap ids in increasing order; *n = their count (PITH_ERR_BUFFER_TOO_SMALL if cap < *n). */
PITH_IMPORT(vocab_special) pith_status_t pith_vocab_special(pith_model_t model, uint32_t* ids,
                                                            uint32_t cap, uint32_t* n);
/* The vocabulary as a byte trie in pith/token_trie.hpp's flat form (32-bit words; special
 * tokens left out), built once per model by the host so that grammar-constrained inferlets do
 * not sort and build it per request. Writes up to cap bytes to buf (4-byte aligned); *len = the
 * trie's size in bytes (PITH_ERR_BUFFER_TOO_SMALL if cap < *len, so a first call with cap 0
 * asks the size). PITH_ERR_UNSUPPORTED where the host has no vocabulary trie. */
PITH_IMPORT(vocab_trie) pith_status_t pith_vocab_trie(pith_model_t model, void* buf, uint32_t cap,
                                                      uint32_t* len);

/* ---- command queues (api/queue.cpp) ------------------------------------------------------ */

PITH_IMPORT(queue_create) pith_status_t pith_queue_create(pith_model_t model, pith_queue_t* queue);
/* Destroys the queue; its pending futures complete with PITH_ERR_CANCELLED. Resources allocated
 * through it stay owned by the instance until dealloc or exit. */
PITH_IMPORT(queue_destroy) pith_status_t pith_queue_destroy(pith_queue_t queue);
/* Completes when every command queued before it has executed (result: no bytes). */
PITH_IMPORT(queue_synchronize) pith_status_t pith_queue_synchronize(pith_queue_t queue,
                                                                    pith_future_t* future);
/* 0 = lowest; higher values are scheduled first among ready batches (max 7). */
/* Binds a queue to an adapter (0: the base model). Its forward and forward_tokens calls that name
 * no adapter run with it, and its prefix_match / prefix_insert use that adapter's part of the
 * radix cache: K/V computed with one adapter is never matched for another or for the base. */
PITH_IMPORT(queue_set_adapter) pith_status_t pith_queue_set_adapter(pith_queue_t queue,
                                                                    pith_adapter_t adapter);
PITH_IMPORT(queue_set_priority) pith_status_t pith_queue_set_priority(pith_queue_t queue,
                                                                      uint32_t priority);

/* ---- resources: KV pages and embeddings (api/resources.cpp) ------------------------------ */

/* What an allocation does when KV memory is short. PITH_KV_WAIT (the default): it waits, and the
 * instance may be suspended meanwhile (its pages moved to host memory and back): latency, never
 * lost state. PITH_KV_FAIL_FAST: it fails at once with PITH_ERR_OUT_OF_KV_PAGES. Per instance. */
#define PITH_KV_WAIT 0u
#define PITH_KV_FAIL_FAST 1u
PITH_IMPORT(kvpage_policy) pith_status_t pith_kvpage_policy(pith_model_t model, uint32_t policy);

/* Allocates n pages; writes n handles to pages. All or nothing (PITH_ERR_OUT_OF_KV_PAGES when
 * the instance alone needs more than the pool, or fails fast, or exceeds its quota). */
PITH_IMPORT(kvpage_alloc) pith_status_t pith_kvpage_alloc(pith_queue_t queue, uint32_t n,
                                                          pith_kvpage_t* pages);
PITH_IMPORT(kvpage_dealloc) pith_status_t pith_kvpage_dealloc(pith_queue_t queue,
                                                              const pith_kvpage_t* pages,
                                                              uint32_t n);
PITH_IMPORT(emb_alloc) pith_status_t pith_emb_alloc(pith_queue_t queue, uint32_t n,
                                                    pith_emb_t* embs);
PITH_IMPORT(emb_dealloc) pith_status_t pith_emb_dealloc(pith_queue_t queue, const pith_emb_t* embs,
                                                        uint32_t n);
/* Copies count token slots from src[src_offset..] to dst[dst_offset..] (copy_kvpage). */
PITH_IMPORT(kvpage_copy) pith_status_t pith_kvpage_copy(pith_queue_t queue, pith_kvpage_t src,
                                                        pith_kvpage_t dst, uint32_t src_offset,
                                                        uint32_t dst_offset, uint32_t count);
/* Sets the visibility of the page's token slots: mask[i] != 0 hides slot i from attention
 * (mask_kvpage). len <= tokens_per_page. */
PITH_IMPORT(kvpage_mask) pith_status_t pith_kvpage_mask(pith_queue_t queue, pith_kvpage_t page,
                                                        const uint8_t* mask, uint32_t len);
/* Publishes pages under a server-wide name so other instances can import them read-only
 * (export_kvpage). The pages stay alive while exported, even after this instance ends. */
PITH_IMPORT(kvpage_export) pith_status_t pith_kvpage_export(pith_queue_t queue,
                                                            const pith_kvpage_t* pages, uint32_t n,
                                                            const char* name, uint32_t name_len);
PITH_IMPORT(kvpage_unexport) pith_status_t pith_kvpage_unexport(pith_queue_t queue,
                                                                const char* name,
                                                                uint32_t name_len);
/* Imports an exported page set (import_kvpage): writes up to cap new handles, *n = set size. */
PITH_IMPORT(kvpage_import) pith_status_t pith_kvpage_import(pith_queue_t queue, const char* name,
                                                            uint32_t name_len, pith_kvpage_t* pages,
                                                            uint32_t cap, uint32_t* n);

/* ---- the server's radix prefix cache (api/resources.cpp) ---------------------------------- */

/* Looks up the longest cached prefix of tokens[0..n) in whole pages (positions 0.., causal)
 * and imports its pages read-only into this instance: up to cap new handles are written to
 * pages, *n_pages = the number of matched pages, *matched = matched tokens (n_pages *
 * tokens_per_page). Write to a shared page only after copying it (kvpage_copy). With the cache
 * disabled (--no-prefix-cache) nothing matches. */
PITH_IMPORT(prefix_match) pith_status_t pith_prefix_match(pith_queue_t queue, const uint32_t* tokens,
                                                          uint32_t n, pith_kvpage_t* pages,
                                                          uint32_t cap, uint32_t* n_pages,
                                                          uint32_t* matched);
/* Offers computed pages to the cache: pages[i] holds the K/V of tokens[i*P .. (i+1)*P) at
 * positions 0.. (P = tokens_per_page; n >= n_pages * P). Blocks already cached keep their copy. */
PITH_IMPORT(prefix_insert) pith_status_t pith_prefix_insert(pith_queue_t queue, const uint32_t* tokens,
                                                            uint32_t n, const pith_kvpage_t* pages,
                                                            uint32_t n_pages);

/* ---- recurrent states of hybrid models (api/state.cpp) ------------------------------------
 * A model with recurrent layers (trait "recurrent_state"; e.g. Qwen3.5's Gated DeltaNet layers
 * beside its attention layers) summarises a sequence in a fixed-size state (trait
 * "state_bytes=N") next to the KV pages of its attention layers. Every forward on such a model
 * advances the state bound to its queue over its inputs, so a queue's forwards must continue one
 * sequence in order, without attention masks (PITH_ERR_BAD_ARGUMENT otherwise: no state bound,
 * a mask, or kvpage_mask on a page the forward reads). A fork is a kvpage/state copy; rolling a
 * sequence back means recomputing it into a new state. On a model without recurrent layers
 * these calls answer PITH_ERR_UNSUPPORTED (prefix_*_state: PITH_ERR_BAD_ARGUMENT). */

/* Allocates n empty states (the sequence before its first token); all or nothing:
 * PITH_ERR_OUT_OF_STATES when the pool (pith serve --state-memory) or the instance's quota
 * (--max-states-per-inferlet) cannot give them, after unused prefix-cache checkpoints. */
PITH_IMPORT(state_alloc) pith_status_t pith_state_alloc(pith_queue_t queue, uint32_t n,
                                                        pith_state_t* states);
PITH_IMPORT(state_dealloc) pith_status_t pith_state_dealloc(pith_queue_t queue,
                                                            const pith_state_t* states,
                                                            uint32_t n);
/* Queues dst := src (fork: dst then continues exactly as src would), after the commands queued
 * before it on this queue. */
PITH_IMPORT(state_copy) pith_status_t pith_state_copy(pith_queue_t queue, pith_state_t src,
                                                      pith_state_t dst);
/* Binds the state that the queue's forward, forward_with_adapter and forward_tokens advance
 * (0 unbinds). */
PITH_IMPORT(queue_set_state) pith_status_t pith_queue_set_state(pith_queue_t queue,
                                                                pith_state_t state);
/* Publishes a state under a server-wide name (its own namespace, beside kvpage_export's);
 * kept while exported, even after this instance ends. An importer gets a handle on the same
 * state and copies it (state_copy) into one of its own before advancing it. */
PITH_IMPORT(state_export) pith_status_t pith_state_export(pith_queue_t queue, pith_state_t state,
                                                          const char* name, uint32_t name_len);
PITH_IMPORT(state_unexport) pith_status_t pith_state_unexport(pith_queue_t queue,
                                                              const char* name,
                                                              uint32_t name_len);
PITH_IMPORT(state_import) pith_status_t pith_state_import(pith_queue_t queue, const char* name,
                                                          uint32_t name_len,
                                                          pith_state_t* state);
/* The prefix cache of a hybrid model keeps state checkpoints: prefix_match_state is
 * prefix_match that ends on the longest cached prefix with a checkpoint and also imports that
 * state (*state; 0 when nothing matched). Copy it into the context's own state before the
 * forward over the rest. *shared = the tokens the cache holds pages for (>= *matched): where
 * this prompt diverges from cached ones, the place a new checkpoint serves later prompts best. prefix_insert_state offers pages with the state after exactly their
 * n_pages * tokens_per_page tokens. When cap is too small, prefix_match_state imports nothing:
 * *n_pages says how many pages the match needs (PITH_ERR_BUFFER_TOO_SMALL). */
PITH_IMPORT(prefix_match_state) pith_status_t pith_prefix_match_state(
    pith_queue_t queue, const uint32_t* tokens, uint32_t n, pith_kvpage_t* pages, uint32_t cap,
    uint32_t* n_pages, uint32_t* matched, pith_state_t* state, uint32_t* shared);
PITH_IMPORT(prefix_insert_state) pith_status_t pith_prefix_insert_state(
    pith_queue_t queue, const uint32_t* tokens, uint32_t n, const pith_kvpage_t* pages,
    uint32_t n_pages, pith_state_t state);

/* ---- compute (api/compute.cpp) ----------------------------------------------------------- */

/* Writes token embeddings for tokens[i] at positions[i] into embs[i] (embed_txt). */
PITH_IMPORT(embed_txt) pith_status_t pith_embed_txt(pith_queue_t queue, const uint32_t* tokens,
                                                    const uint32_t* positions, uint32_t n,
                                                    const pith_emb_t* embs);
/* Encodes an image (encoded bytes, e.g. PNG) into n embedding slots (embed_img). */
PITH_IMPORT(embed_img) pith_status_t pith_embed_img(pith_queue_t queue, const uint8_t* image,
                                                    uint32_t image_len, const pith_emb_t* embs,
                                                    uint32_t n);

/* One transformer pass (forward): attends over kv_pages (the last one filled up to
 * last_page_len slots, including the new tokens), appends the K/V of the inputs and writes
 * output hidden states. */
typedef struct pith_forward_args_t {
  PITH_GUEST_PTR(const pith_kvpage_t) kv_pages;
  uint32_t kv_page_count;
  uint32_t last_page_len;
  PITH_GUEST_PTR(const pith_emb_t) input_embs;
  uint32_t input_count;
  PITH_GUEST_PTR(const pith_emb_t) output_embs; /* may be 0 when output_count is 0 */
  uint32_t output_count;                        /* <= input_count: the last output_count inputs */
} pith_forward_args_t;
PITH_IMPORT(forward) pith_status_t pith_forward(pith_queue_t queue,
                                                const pith_forward_args_t* args);
PITH_IMPORT(forward_with_adapter) pith_status_t pith_forward_with_adapter(
    pith_queue_t queue, pith_adapter_t adapter, const pith_forward_args_t* args);

/* Next-token distribution of an output embedding (get_next_dist). Future result: uint32 k, then
 * k uint32 token ids, then k float32 probabilities, sorted by decreasing probability. top_k = 0
 * means the host's default; top_k = PITH_TOP_K_ALL asks for the whole vocabulary instead, in
 * token-id order (k = vocab_size, ids 0..k-1, NOT sorted): what grammar masks, watermarks and
 * likelihood scoring need, since the token they care about may lie outside any top-K. */
#define PITH_TOP_K_ALL 0xFFFFFFFFu
/* top_k = PITH_TOP_K_LOGITS (forward_tokens only; next_dist answers PITH_ERR_UNSUPPORTED): the
 * whole vocabulary in id order like PITH_TOP_K_ALL, with the raw logits (float32) in place of
 * the probabilities. Logit biases add to logits and a repetition penalty divides or multiplies
 * a logit by its sign, which probabilities (logits minus an unknown constant) cannot express. */
#define PITH_TOP_K_LOGITS 0xFFFFFFFEu
/* top_k = PITH_TOP_K_HIDDEN (forward_tokens only): each output is the model's final hidden state
 * after its output norm (what the LM head reads), in place of a distribution: uint32 n, then n
 * float32 (n = the model's hidden size). An embedding model's sequence embedding is this state
 * at the last token (or the mean over every token), pooled and normalised by the caller. */
#define PITH_TOP_K_HIDDEN 0xFFFFFFFDu
PITH_IMPORT(next_dist) pith_status_t pith_next_dist(pith_queue_t queue, pith_emb_t emb,
                                                    uint32_t top_k, pith_future_t* future);

/* Fused token-level forward: embed + forward + next_dist in one command, without embedding
 * handles. attn_mask (optional, 0 = causal) holds one bit per (input token, context slot) pair,
 * row-major, rows of ceil(context_len / 8) bytes, bit set = may attend; context_len =
 * (kv_page_count - 1) * tokens_per_page + last_page_len; the host checks attn_mask_len
 * against it. Future result: for each of the output_count output indices, the get_next_dist
 * layout (uint32 k, ids, probs) back to back (top_k = PITH_TOP_K_ALL: full vocabulary, id order,
 * about 1 MB per output for a 128k vocabulary). */
typedef struct pith_forward_tokens_args_t {
  PITH_GUEST_PTR(const uint32_t) tokens;
  PITH_GUEST_PTR(const uint32_t) positions;
  uint32_t token_count;
  PITH_GUEST_PTR(const pith_kvpage_t) kv_pages;
  uint32_t kv_page_count;
  uint32_t last_page_len;
  PITH_GUEST_PTR(const uint8_t) attn_mask;      /* 0 = causal */
  uint32_t attn_mask_len;                       /* bytes: token_count * ceil(context_len / 8) */
  PITH_GUEST_PTR(const uint32_t) output_indices; /* indices into tokens wanting a distribution */
  uint32_t output_count;
  uint32_t top_k;
  pith_adapter_t adapter;                       /* 0 = none */
} pith_forward_tokens_args_t;
PITH_IMPORT(forward_tokens) pith_status_t pith_forward_tokens(
    pith_queue_t queue, const pith_forward_tokens_args_t* args, pith_future_t* future);

/* forward_tokens whose top-K may only hold allowed tokens: a grammar's mask goes down with the
 * step instead of the whole vocabulary coming up (16 KB down instead of 1 MB up per output for a
 * 128k vocabulary, and no partial sort in the guest). allowed: output_count masks back to back,
 * each ceil(vocab_size / 64) words; bit i % 64 of word i / 64 set = token i allowed.
 * allowed_words = output_count * ceil(vocab_size / 64) (0: no masks, as forward_tokens). Each
 * output's distribution holds its min(top_k, allowed) most likely allowed tokens, sorted as
 * next_dist's (fewer than top_k entries when fewer are allowed, k = 0 when none is);
 * probabilities stay the softmax over the whole vocabulary, so a sampler renormalises over them
 * and logprobs are the model's. top_k must be an ordinary K (not PITH_TOP_K_ALL /
 * PITH_TOP_K_LOGITS: those already send every token). */
PITH_IMPORT(forward_tokens_allowed) pith_status_t pith_forward_tokens_allowed(
    pith_queue_t queue, const pith_forward_tokens_args_t* args, const uint64_t* allowed,
    uint32_t allowed_words, pith_future_t* future);

/* forward_tokens_allowed whose outputs also adjust logits before ranking: OpenAI's logit_bias,
 * repetition, presence and frequency penalties go down with the step (a few hundred entries)
 * instead of the whole vocabulary's logits coming up (PITH_TOP_K_LOGITS, 512 KB per output for a
 * 128k vocabulary). Each entry changes one logit of one output:
 *   l' = rep(l + bias) - penalty, rep(x) = x / repetition if x > 0, else x * repetition;
 * then the output's top-K ranks l' and its probabilities are softmax(l') over the whole
 * vocabulary: the distribution to sample from (so logprobs are the adjusted ones). A token mask,
 * if any, applies after. Entries are sorted by output, then token, each (output, token) once;
 * values finite, repetition > 0. penalty = PITH_LOGIT_BAN keeps a token out of the top-K while
 * others remain (probability 0): min_tokens' held-back tokens. allowed/allowed_words as
 * forward_tokens_allowed (0 words: no masks); top_k an ordinary K. */
typedef struct pith_logit_adjust_t {
  uint32_t output; /* index into output_indices */
  uint32_t token;
  float bias;
  float repetition; /* 1: none */
  float penalty;
} pith_logit_adjust_t;
#define PITH_LOGIT_BAN 1e30f
PITH_IMPORT(forward_tokens_adjusted) pith_status_t pith_forward_tokens_adjusted(
    pith_queue_t queue, const pith_forward_tokens_args_t* args, const uint64_t* allowed,
    uint32_t allowed_words, const pith_logit_adjust_t* adjusts, uint32_t adjust_count,
    pith_future_t* future);

#if defined(__wasm32__)
_Static_assert(sizeof(pith_logit_adjust_t) == 20, "wasm32 layout");
_Static_assert(sizeof(pith_forward_args_t) == 28, "wasm32 layout");
_Static_assert(sizeof(pith_forward_tokens_args_t) == 48, "wasm32 layout");
_Static_assert(sizeof(pith_model_info_t) == 24, "wasm32 layout");
#endif

#ifdef __cplusplus
}
#endif

#endif /* PITH_ABI_H_ */
/* clang-format on */
