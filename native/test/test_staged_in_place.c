/* Host-staged chunks between two processes of one host are written in place (ucx_stage_targets.c): the source
 * copies each chunk into the reader's bounce buffer, a sealed memfd the request names, and answers without the
 * bytes. Every byte checked, and the in-place bytes counted; a request naming a file that is not that buffer (a
 * token of another or of a request before, a file that may grow, of another size, without the magic, a regular
 * file) gets the bytes in its answer and the file is left as it was; a chunk asked of a stopped source and abandoned
 * retires its buffer; a source lets go of a gone reader's buffer.
 * The first case also runs on the machine's driver (KVT_TEST_CUDA_REAL=1, tools/gpu-check); the others on the
 * fake one. */
#include "cuda_pulls.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if KVT_HAVE_UCX
#include "backends/ucx/ucx_staging.h" /* STAGE_BUFFER_*, kvt_test_staged_counts */

#define CHUNKED_BYTES ((9u << 20) + 4096u) /* three chunks of 4 MiB, the last short */

static kvt_staged_counts staged_counts(uint32_t agent) {
    kvt_staged_counts counts;
    CHECK_OK(kvt_test_staged_counts(agent, &counts));
    return counts;
}

static uint64_t in_place_bytes(uint32_t agent) { return staged_counts(agent).in_place_bytes; }

static uint64_t retired_buffers(uint32_t agent) { return staged_counts(agent).retired; }

/* READs [0, length) of the source's region into the reader's and checks every byte. */
static void pull_whole(const vram_reader *r, uint64_t length, uint64_t seed) {
    uint64_t op = 0;
    CHECK_OK(post_one(r->agent, KVT_XFER_READ, r->peer, r->generation, r->local, 0, r->remote, 0, length, &op));
    wait_completions_ok(r->agent, 1, length, true);
    CHECK(holds_pattern(r->local_vram, length, 0, seed), "every byte of the source's region landed");
}

/* A staged reader of a source process on this host: whole regions of three chunks, many small pieces and a
 * template, every byte checked, every chunk written in place. */
static void written_in_place(void) {
    source_process source;
    CHECK(source_spawn(&(source_options){.length = CHUNKED_BYTES, .vram_memory = true, .seed = 109}, &source),
          "the source process starts");
    vram_reader r = open_vram_reader("staged-in-place", KVT_AGENT_VRAM_STAGED, &source, CHUNKED_BYTES);
    pull_whole(&r, CHUNKED_BYTES, 109);
    CHECK(in_place_bytes(r.agent) == CHUNKED_BYTES, "every chunk was written in place (%llu of %u bytes)",
          (unsigned long long)in_place_bytes(r.agent), CHUNKED_BYTES);
    vram_fill_pattern(r.local_vram, CHUNKED_BYTES, 1);
    pull_many_pieces(r.agent, r.peer, r.generation, r.local, r.remote, r.local_vram, 109);
    pull_by_template(r.agent, r.peer, r.generation, r.local, r.remote, r.local_vram, 109);
    CHECK(retired_buffers(r.agent) == 0, "no buffer was retired");
    close_vram_reader(&r);
    source_end(&source);
}

static void staged_chunks_are_written_in_place(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "host-staged pulls move through UCX");
    on_driver_under_test("1", written_in_place);
}

#define FORGED_TOKEN 0x5eedull

/* A file holding the pattern of 113, a bounce buffer's header with `magic` and FORGED_TOKEN first, of `bytes`: a
 * memfd sealed with `seals`, or a regular file. */
typedef struct {
    bool memfd;
    int seals;
    uint64_t bytes;
    const char *magic;
    const char *what;
} forged_file;

static int forge(const forged_file *forged, uint8_t **out_bytes) {
    int fd = -1;
    if (forged->memfd) {
        fd = memfd_create("forged-bounce", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    } else {
        char path[] = "/tmp/kvreuse-forged-XXXXXX";
        fd = mkstemp(path);
        if (fd >= 0) unlink(path);
    }
    CHECK(fd >= 0 && ftruncate(fd, (off_t)forged->bytes) == 0, "%s", forged->what);
    uint8_t *bytes = mmap(NULL, forged->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(bytes != MAP_FAILED, "%s mapped", forged->what);
    fill_pattern(bytes, forged->bytes, 113);
    stage_buffer_header header = {.token = FORGED_TOKEN};
    memcpy(header.magic, forged->magic, sizeof header.magic);
    memcpy(bytes, &header, sizeof header);
    CHECK(forged->seals == 0 || fcntl(fd, F_ADD_SEALS, forged->seals) == 0, "%s sealed", forged->what);
    *out_bytes = bytes;
    return fd;
}

/* Whether the forged file's chunk holds the first `length` bytes of the pattern of `seed` (written in place). */
static bool written(const uint8_t *bytes, uint64_t length, uint64_t seed) {
    return check_pattern(bytes + STAGE_BUFFER_HEADER_BYTES, length, seed);
}

/* Whether the forged file still holds its own pattern past its header. */
static bool untouched(const uint8_t *bytes, uint64_t length) {
    uint8_t *expected = malloc(length);
    fill_pattern(expected, length, 113);
    bool same = memcmp(bytes + sizeof(stage_buffer_header), expected + sizeof(stage_buffer_header),
                       length - sizeof(stage_buffer_header)) == 0;
    free(expected);
    return same;
}

/* Requests naming what is not the reader's bounce buffer, each holding FORGED_TOKEN: the reader's own buffer (of
 * another token), a memfd that may grow, one of another size, one without the magic, and a regular file. None is
 * written: the bytes come back in the answer, and each file keeps its bytes. A memfd made as a bounce buffer is
 * (the control: it differs from each of those in the one property) is written in place. The reader's buffer named
 * honestly is written in place; named with the token of its request before (a token a source learned), it is
 * not. */
static void forged_buffers(void) {
    source_process source;
    CHECK(source_spawn(&(source_options){.length = PULL_BYTES, .vram_memory = true, .seed = 127}, &source),
          "the source process starts");
    vram_reader r = open_vram_reader("staged-forger", KVT_AGENT_VRAM_STAGED, &source, PULL_BYTES);
    CHECK_OK(kvt_test_forge_staged_buffers(r.agent, -1, FORGED_TOKEN));
    pull_whole(&r, PULL_BYTES, 127);
    CHECK(in_place_bytes(r.agent) == 0, "its own buffer was not written in place under another token");
    const int bounce_seals = F_SEAL_SHRINK | F_SEAL_GROW;
    const forged_file refused[4] = {
        {true, F_SEAL_SHRINK, STAGE_BUFFER_FILE_BYTES, STAGE_BUFFER_MAGIC, "a memfd that may grow"},
        {true, bounce_seals, STAGE_BUFFER_FILE_BYTES - 4096, STAGE_BUFFER_MAGIC, "a memfd of another size"},
        {true, bounce_seals, STAGE_BUFFER_FILE_BYTES, "KVTOTHER", "a memfd without the magic"},
        {false, 0, STAGE_BUFFER_FILE_BYTES, STAGE_BUFFER_MAGIC, "a regular file"},
    };
    for (int i = 0; i < 4; i++) {
        uint8_t *bytes = NULL;
        int fd = forge(&refused[i], &bytes);
        CHECK_OK(kvt_test_forge_staged_buffers(r.agent, fd, FORGED_TOKEN));
        vram_fill_pattern(r.local_vram, PULL_BYTES, 1);
        pull_whole(&r, PULL_BYTES, 127);
        CHECK(in_place_bytes(r.agent) == 0, "nothing was written in place into %s", refused[i].what);
        CHECK(untouched(bytes, refused[i].bytes), "%s keeps its bytes", refused[i].what);
        munmap(bytes, refused[i].bytes);
        close(fd);
    }
    const forged_file control = {true, bounce_seals, STAGE_BUFFER_FILE_BYTES, STAGE_BUFFER_MAGIC, "the control"};
    uint8_t *bytes = NULL;
    int fd = forge(&control, &bytes);
    CHECK_OK(kvt_test_forge_staged_buffers(r.agent, fd, FORGED_TOKEN));
    uint64_t op = 0;
    CHECK_OK(post_one(r.agent, KVT_XFER_READ, r.peer, r.generation, r.local, 0, r.remote, 0, PULL_BYTES, &op));
    wait_completions_ok(r.agent, 1, PULL_BYTES, true);
    CHECK(in_place_bytes(r.agent) == PULL_BYTES && written(bytes, PULL_BYTES, 127),
          "a memfd made as a bounce buffer is, of the token named, is written in place");
    munmap(bytes, STAGE_BUFFER_FILE_BYTES);
    close(fd);
    CHECK_OK(kvt_test_forge_staged_buffers(r.agent, -1, 0));
    pull_whole(&r, PULL_BYTES, 127);
    CHECK(in_place_bytes(r.agent) == 2 * PULL_BYTES, "its own buffer, named honestly, is written in place");
    CHECK_OK(kvt_test_forge_staged_buffers(r.agent, -1, KVT_TEST_REPLAYED_TOKEN));
    vram_fill_pattern(r.local_vram, PULL_BYTES, 1);
    pull_whole(&r, PULL_BYTES, 127);
    CHECK(in_place_bytes(r.agent) == 2 * PULL_BYTES, "not under the token of the request before, replayed");
    close_vram_reader(&r);
    source_end(&source);
}

static void forged_buffers_are_not_written(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "host-staged pulls move through UCX");
    on_fake_driver("1", forged_buffers);
}

/* A READ of a stopped source, canceled with its chunk asked: the chunk's buffer is retired, since the source may
 * write it once it runs again. It then answers into the retired buffer (dropped), and the next READ moves every
 * byte through another. */
static void abandoned_chunk(void) {
    source_process source;
    CHECK(source_spawn(&(source_options){.length = PULL_BYTES, .vram_memory = true, .seed = 131}, &source),
          "the source process starts");
    vram_reader r = open_vram_reader("staged-abandoner", KVT_AGENT_VRAM_STAGED, &source, PULL_BYTES);
    source_signal(&source, SIGSTOP);
    source_wait_stopped(&source);
    uint64_t op = 0, asked = counter(r.agent, KVT_COUNTER_REQUESTS_ISSUED);
    CHECK_OK(post_one(r.agent, KVT_XFER_READ, r.peer, r.generation, r.local, 0, r.remote, 0, PULL_BYTES, &op));
    wait_counter_at_least(r.agent, KVT_COUNTER_REQUESTS_ISSUED, asked + 1);
    CHECK_STATUS(KVT_IN_PROGRESS, kvt_xfer_cancel(r.agent, op));
    int32_t ended = wait_op(r.agent, op, NULL);
    CHECK(ended == KVT_ERR_CANCELED, "the unanswered READ ends CANCELED, not %s", kvt_status_name(ended));
    CHECK_OK(kvt_xfer_release(r.agent, op));
    CHECK(retired_buffers(r.agent) == 1, "its chunk's buffer was retired (%llu)",
          (unsigned long long)retired_buffers(r.agent));
    source_signal(&source, SIGCONT);
    CHECK_OK(kvt_peer_unload(r.agent, r.peer)); /* its endpoint was force-closed by the cancel */
    CHECK_OK(kvt_peer_load(r.agent, source.blob, source.length, &r.peer, &r.generation));
    pull_whole(&r, PULL_BYTES, 131);
    CHECK(in_place_bytes(r.agent) == PULL_BYTES, "the next READ was written in place");
    close_vram_reader(&r);
    source_end(&source);
}

static void an_abandoned_chunk_retires_its_buffer(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "host-staged pulls move through UCX");
    on_fake_driver("1", abandoned_chunk);
}
/* A staged reader (reader_fork): pulls the source's region, says so, then, when `stop_agent`, destroys its agent
 * (closing its bounce buffers' fds) and says so again. */
static void pull_staged(int down, int up, bool stop_agent) {
    vram_reader r = reader_open(down, "staged-gone", KVT_AGENT_VRAM_STAGED);
    pull_whole(&r, PULL_BYTES, 137);
    CHECK(in_place_bytes(r.agent) == PULL_BYTES, "the reader's chunk was written in place");
    CHECK(write(up, "p", 1) == 1, "pulled");
    if (stop_agent) {
        close_vram_reader(&r);
        CHECK(write(up, "s", 1) == 1, "stopped");
    }
}

static bool no_targets_kept(void *context) { return staged_counts(*(uint32_t *)context).targets == 0; }

/* Serves `reader` a pull it gets in place, then waits until the buffer this source kept for it is let go (the
 * reader is killed, or stopped its agent, first: `end`), its pages unpinned. */
static void serve_until_let_go(uint32_t source, const reader_process *reader, void (*end)(const reader_process *)) {
    send_metadata(source, reader->down);
    reader_await(reader, 'p');
    int live = live_allocations();
    CHECK(staged_counts(source).targets == 1, "the source keeps the reader's bounce buffer (%llu)",
          (unsigned long long)staged_counts(source).targets);
    end(reader);
    wait_until(0, no_targets_kept, &source, "the source to let the gone reader's buffer go", WAIT_DEADLINE_MS);
    CHECK(live_allocations() == live - 1, "its pages were unpinned (%d pinned or allocated, %d before)",
          live_allocations(), live);
}

static void await_agent_stopped(const reader_process *reader) { reader_await(reader, 's'); }

/* A source lets go of a reader's bounce buffer once the reader is gone, or once it stopped its agent while its
 * process lives on: kept, the buffer's pages would stay pinned here. */
static void gone_readers(void) {
    reader_process killed = reader_fork(pull_staged, false), stopped = reader_fork(pull_staged, true);
    uint32_t source = make_agent("staged-source"), region = 0;
    uint64_t vram = 0;
    CHECK_OK(kvt_mem_alloc_vram(source, 0, PULL_BYTES, &vram));
    vram_fill_pattern(vram, PULL_BYTES, 137);
    CHECK_OK(kvt_mem_register(source, vram, PULL_BYTES, KVT_MEM_VRAM, 0, &region));
    serve_until_let_go(source, &killed, reader_end);
    serve_until_let_go(source, &stopped, await_agent_stopped);
    reader_end(&stopped);
    CHECK_OK(kvt_mem_deregister(source, region));
    CHECK_OK(kvt_mem_free(source, vram));
    CHECK_OK(kvt_agent_destroy(source));
}

static void a_gone_readers_buffers_are_let_go(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "host-staged pulls move through UCX");
    on_fake_driver("1", gone_readers);
}
#else
static void staged_chunks_are_written_in_place(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "host-staged pulls move through UCX");
}
static void forged_buffers_are_not_written(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "host-staged pulls move through UCX");
}
static void an_abandoned_chunk_retires_its_buffer(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "host-staged pulls move through UCX");
}
static void a_gone_readers_buffers_are_let_go(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "host-staged pulls move through UCX");
}
#endif

TEST_MAIN("staged_in_place", TEST(staged_chunks_are_written_in_place), TEST(forged_buffers_are_not_written),
          TEST(an_abandoned_chunk_retires_its_buffer), TEST(a_gone_readers_buffers_are_let_go))
