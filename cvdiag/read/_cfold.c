/* The compiled fold of the tests pass: cvdiag.read._cfold.
 *
 * fold.Fold drives it when it is built (see fold.py). It reads a buffer as Fold.buffer
 * does -- finds each envelope head, matches the emitter's canonical layout, checks the
 * fixed tail -- and keeps, per test, what Fold.fold (the row) and Evidence._fold_head (the
 * counts and the places in time of the diagnosis) keep, in C. Python is called only
 * for what it alone decides: a test seen for the first time (admit), a boundary name
 * seen for the first time (boundary_info), a line not in the canonical layout (line;
 * lines behind colour codes and Docker json-file records are read here where the general
 * parser certainly reads the same envelope), the metadata of a body the diagnosis needs
 * (metadata), or the whole line when it is not in the emitter's plain layout (body), a
 * time not in the emitter's shape (ts_facts), a metadata object to prove (loads). Lines
 * are taken in file order, so every first/last value is picked as the Python fold picks it.
 *
 * Nothing here is a rule of the diagnosis: take() hands the counts back, and
 * Python puts them where the rules read them (fold.py, evidence.py).
 *
 * Count mode (given ``pair``, for count.py's stats pass): no tests, only envelopes per
 * (slug, boundary, outcome); a line is counted here only when it is certainly a valid
 * envelope that says nothing beyond its head, every other line goes to Python.
 *
 * Folder.event serves the report: one line's event as report_data._encode writes it,
 * where the general parser certainly reads the line as its head says.
 *
 * Functions of the module serve the readers: certainly_object (a strict JSON reading:
 * true only where orjson would read an object too), canonical_object (JSON that orjson
 * writes back byte for byte) and untouched (whether parsing.coerce certainly has nothing
 * to change, from rules parsing.py builds); newlines counts lines; read_block reads a
 * block; reuse_block_memory and release_free_memory tune the CLI's allocator.
 */
#define PY_SSIZE_T_CLEAN
#ifndef CVDIAG_SOURCE_HASH /* setup.py builds in the hash of this file (cvdiag.contract.compiled) */
#define CVDIAG_SOURCE_HASH ""
#endif
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <math.h>
#include <string.h>
/* The 16-byte compares where SSE2 is (every x86-64); the byte loops beside them elsewhere
 * (ARM), or when built with -DCVDIAG_NO_SSE2 (CI runs the compiled fold's tests so). */
#if defined(__SSE2__) && !defined(CVDIAG_NO_SSE2)
#define CVDIAG_SSE2 1
#include <emmintrin.h>
#endif
#ifdef __GLIBC__
#include <malloc.h>
#endif
#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#endif
#if defined(__GNUC__) || defined(__clang__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

/* -- head layout: kinds of the fields before edge_headers (fold._FIELD_KINDS) -------- */
enum { K_LITERAL = 0, K_CAPTURE_STR = 1, K_STR = 2, K_NULL_OR_STR = 3, K_CAPTURE_INT = 4, K_NULL_OR_INT = 5 };
#define MAX_FIELDS 32
/* What a head field is to the fold (contract.layout.ROLES, in its order): the captured ones
 * first (their text is kept per line), then the duration (the null-or-integer kept). The
 * layout hands each field's role in (Folder's fields); the module says these (ROLES). */
enum { ROLE_TEST_ID, ROLE_LAYER, ROLE_BOUNDARY, ROLE_SLUG, ROLE_TS, ROLE_MONO, ROLE_OUTCOME, ROLE_DURATION, N_ROLES };
static const char *const ROLE_NAMES[N_ROLES] = {"test_id", "layer", "boundary", "slug", "ts", "mono_ns", "outcome", "duration"};
#define N_CAPTURES ROLE_DURATION /* the roles whose text is kept: test_id .. outcome */
#define MAX_SLUGS 4
#define MAX_BOUNDARY_NAMES 64
#define N_LAYER_CLASSES 4 /* aimock, backend, other, probe: a head's *_events (Evidence's layer counts) */
#define MAX_COUNTERS 16 /* room for the head-only counters of the diagnosis (Evidence.head_counters: handed in) */
#define NAME_TABLE_MAX 65536
#define LAYER_AIMOCK 0
#define LAYER_BACKEND 1
#define LAYER_OTHER 2
#define LAYER_PROBE 3

#define NAME_ROOM 32 /* a field's name compared in two 16-byte loads when it is no longer */

typedef struct {
    char *name; /* the key with its quotes and colon: "name": */
    Py_ssize_t name_len;
    int kind;
    int role; /* ROLE_*, or -1: matched, not kept */
    char *literal;
    Py_ssize_t literal_len;
    char padded[NAME_ROOM]; /* the name, zero-padded: compared 16 bytes at a time */
    uint32_t need;          /* its bytes' bits in the comparison's mask (0: longer than NAME_ROOM) */
} Field;

typedef struct {
    int64_t us;   /* microseconds since the epoch */
    uint64_t off; /* mono_ns + 2**63, clamped into 0..2**64-1 */
} Key;

static int key_lt(Key a, Key b) { return a.us < b.us || (a.us == b.us && a.off < b.off); }

/* -- names: boundaries met, with what Python said of each ------------------------------ */
typedef struct {
    char *bytes;
    Py_ssize_t len;
    uint64_t hash;
    PyObject *str; /* the name as an interned str */
    int plain;     /* Evidence.add_head may fold it from its head (Fold._plain) */
    int counter;   /* index of the head-only counter it adds to, or -1 */
    int accounting;
    int terminal_bit;
    int layer_class; /* of the name's first part, for a line without a known layer */
    int llm_response;
    int64_t count; /* count mode: the envelopes of this (slug, boundary, outcome) */
} Name;

typedef struct {
    Name **slots;
    Py_ssize_t cap, used;
} NameTable;

/* -- a time as the pass keeps it --------------------------------------------------- */
typedef struct {
    int kind; /* 0 none, 1 the 24 bytes below (ASCII), 2 obj */
    char b[24];
    PyObject *obj; /* a str */
} TsRef;

typedef struct {
    int set;
    int has_key;
    Key key;
    TsRef ts;
    PyObject *boundary; /* str, strong */
} PickRef;

typedef struct {
    PyObject *name; /* str, strong */
    int64_t count;
} BCount;

/* -- one test ---------------------------------------------------------------------- */
typedef struct {
    /* the row (fold.Agg) */
    int agg_on;
    Py_ssize_t agg_order; /* the how-manieth test to get a row: Python's rows keep that order */
    int64_t a_events;
    char first[24], last[24];
    int failed, flags;
    PyObject **layers; /* bytes */
    Py_ssize_t n_layers, cap_layers;
    PyObject *slugs[MAX_SLUGS]; /* bytes */
    int n_slugs;
    /* report: where its first envelopes are (fold.Kept), packed (keep_place): about 4 bytes
     * each, not the 12 of three int32s, for every envelope of every test until the end */
    uint8_t *places;
    Py_ssize_t n_places, places_len, cap_places; /* places; bytes used; bytes held */
    int64_t place_block, place_end;              /* the last place's block and end: the next is told from them */
    int64_t more;
    double llm_ms; /* report: the time its LLM calls took, added up in file order (add_llm_ms) */
    int llm_set;   /* a time was added: llm_ms is no None */
    /* the diagnosis head (Evidence._fold_head) */
    int ev;
    int64_t events, lay[N_LAYER_CLASSES], failures, other_names, skipped;
    BCount *bc;
    int n_bc, cap_bc, hint;
    int64_t counters[MAX_COUNTERS];
    PickRef first_pick, last_pick, backend_pick;
} Slot;

/* -- test ids: id -> slot, or what to do with it ------------------------------------ */
enum { T_SKIP = -1, T_UNTRACKED = -2 };
typedef struct {
    char *bytes;
    Py_ssize_t len;
    uint64_t hash;
    Py_ssize_t slot; /* >= 0, or T_SKIP / T_UNTRACKED */
} TidEntry;

/* a name's number in a report's table, remembered for the table's index (Folder.event) */
#define N_NUMBERED 64
typedef struct {
    PyObject *index; /* strong: the dict it was numbered in */
    char bytes[48];
    Py_ssize_t len;
    long long number;
} NumberedName;

struct Folder {
    PyObject_HEAD
    Field fields[MAX_FIELDS];
    int n_fields;
    char *head; Py_ssize_t head_len;       /* what find looks for */
    char *prefix; Py_ssize_t prefix_len;   /* "CVDIAG " */
    char *jprefix; Py_ssize_t jprefix_len; /* "CVDIAG_EVENT " */
    char *markers[2]; Py_ssize_t marker_lens[2];
    char *middle; Py_ssize_t middle_len;   /* all-null edge headers, then "metadata": */
    char *end; Py_ssize_t end_len;         /* the fixed tail after the metadata */
    char *tails[2]; Py_ssize_t tail_lens[2];
    Py_ssize_t tail_room;
    char *failed[4]; Py_ssize_t failed_lens[4]; int n_failed;
    char *accounting; Py_ssize_t accounting_len;
    char *llm_response; Py_ssize_t llm_response_len;
    PyObject *terminal_bits; /* dict bytes -> int */
    PyObject *shared;        /* layer and slug bytes, one object each for all tests */
    PyObject *layer_sets;    /* take: a test's layers (a tuple, as met) -> one frozenset for all tests */
    int backend_bit;
    PyObject *admit, *boundary_info, *ts_facts, *loads; /* callables */
    PyObject *pair; /* count mode (stats): a (slug, boundary, outcome) met the first time -> token, or None */
    NameTable triples; /* count mode: "slug\0boundary\0outcome" -> its token (Name.counter) and count */
    int fold_aggs, with_evidence;
    int n_counters; /* the head-only counters a slot keeps (Evidence.head_counters), at most MAX_COUNTERS */
    Py_ssize_t keep_lines, max_tests;
    Py_ssize_t max_line;                   /* parsing.MAX_LINE: a longer line is Python's to call malformed */
    char *scratch; Py_ssize_t scratch_cap; /* the text of a Docker record, unescaped */
    NumberedName numbered[N_NUMBERED];
    char *event_room; Py_ssize_t event_room_cap; /* Folder.event writes its event here, kept for the next */
    char *event_rules; int event_span; /* set_event_format: one R_ code per head field; the span's field */
    PyObject *event_dumps;             /* set_event_format: writes metadata as a report's row does */
    Py_ssize_t event_seed;             /* set_event_format: the names numbered alike in every table */
    PyObject *k_past_seed;             /* what a table is told once an event numbers a name past them */
    PyObject *k_t0_ms, *k_slug_utf8, *k_strings, *k_events, *k_left, *k_finish; /* a reader's (events_at) */
    int in_event; /* Folder.event is running: it calls Python, and another thread may call it meanwhile */
    int initialised; /* __init__ ran (once: a second call would append fields past MAX_FIELDS) */
    /* state */
    NameTable names;
    TidEntry *tids; Py_ssize_t tids_cap, tids_used;
    Slot **slots; Py_ssize_t n_slots, cap_slots; /* chunks of SLOT_CHUNK: never moved, never copied */
    Py_ssize_t n_taken; /* take: the slots taken in order from the first; a chunk all taken is handed back */
    Py_ssize_t n_aggs;
    int64_t untracked;
    /* the seconds met: YYYY-MM-DDTHH:MM:SS -> epoch seconds, a small direct cache */
    char sec_bytes[19]; int64_t sec_value; int sec_valid;
    PyObject *k_boundary, *k_layer, *k_outcome, *k_ts, *k_mono, *k_slug, *k_test_id, *k_add_metadata;
};

#define SLOT_CHUNK 1024
#define SLOT(f, k) (&(f)->slots[(k) / SLOT_CHUNK][(k) % SLOT_CHUNK])

/* A chunk of slots is mapped apart where the system allows: handed back when its slots are
 * taken, its memory is the system's again at once. In the heap it would stay resident,
 * and the Python rows made of it go to pymalloc's arenas, mapped elsewhere: a pass would
 * hold both (18 MB on a log of 34k tests). */
static Slot *chunk_new(void) {
#if defined(MAP_ANONYMOUS)
    void *p = mmap(NULL, SLOT_CHUNK * sizeof(Slot), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
#else
    return PyMem_Malloc(SLOT_CHUNK * sizeof(Slot));
#endif
}

static void chunk_free(Slot *chunk) {
    if (!chunk) return;
#if defined(MAP_ANONYMOUS)
    munmap(chunk, SLOT_CHUNK * sizeof(Slot));
#else
    PyMem_Free(chunk);
#endif
}

/* -- small helpers ------------------------------------------------------------------ */
static uint64_t fnv(const char *p, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
    return h ? h : 1;
}

static char *copy_bytes(PyObject *b, Py_ssize_t *len) {
    char *p; Py_ssize_t n;
    if (PyBytes_AsStringAndSize(b, &p, &n) < 0) return NULL;
    char *out = PyMem_Malloc(n + 1);
    if (!out) { PyErr_NoMemory(); return NULL; }
    memcpy(out, p, n); out[n] = 0; *len = n;
    return out;
}

/* The first needle in buf[start:end]. Most searches end a few bytes on (the next line's
 * marker or head right after a newline), where memmem's set-up for a 31-byte needle
 * costs more than the search: those are a memchr for the first byte and a compare. */
#define SHORT_SEARCH 256
static Py_ssize_t find(const char *buf, Py_ssize_t start, Py_ssize_t end, const char *needle, Py_ssize_t n) {
    if (start < 0) start = 0;
    if (end - start < n) return -1;
    if (n == 0) return start;
    Py_ssize_t short_end = start + SHORT_SEARCH < end ? start + SHORT_SEARCH : end; /* candidates start below it */
    const char *p = buf + start, *stop = buf + short_end - n;
    while (p <= stop && (p = memchr(p, needle[0], stop - p + 1)) != NULL) {
        if (memcmp(p + 1, needle + 1, n - 1) == 0) return p - buf;
        p++;
    }
    if (short_end == end) return -1;
    Py_ssize_t from = short_end - n + 1; /* every start below it was tried */
    const char *hit = memmem(buf + from, end - from, needle, n);
    return hit ? hit - buf : -1;
}

static Py_ssize_t find_nl(const char *buf, Py_ssize_t start, Py_ssize_t end) {
    if (start >= end) return -1;
    const char *hit = memchr(buf + start, '\n', end - start);
    return hit ? hit - buf : -1;
}

static Py_ssize_t rfind_nl(const char *buf, Py_ssize_t start, Py_ssize_t end) {
    if (start >= end) return -1;
    const char *hit = memrchr(buf + start, '\n', end - start);
    return hit ? hit - buf : -1;
}

static int starts(const char *buf, Py_ssize_t at, Py_ssize_t limit, const char *s, Py_ssize_t n) {
    return at >= 0 && at + n <= limit && memcmp(buf + at, s, n) == 0;
}

static int is_ascii(const char *p, Py_ssize_t n);
typedef struct Folder Folder;

/* -- times ---------------------------------------------------------------------------- */
static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int digits(const char *p, int n, int *out) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return 0;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 1;
}

/* Epoch seconds of the whole second YYYY-MM-DDTHH:MM:SS at t (19 bytes): 0 when it is not
 * exactly that shape of a real UTC time. */
static int whole_second(const char *t, int64_t *secs) {
    int y, mo, d, h, mi, s;
    if (t[4] != '-' || t[7] != '-' || t[10] != 'T' || t[13] != ':' || t[16] != ':') return 0;
    if (!digits(t, 4, &y) || !digits(t + 5, 2, &mo) || !digits(t + 8, 2, &d) || !digits(t + 11, 2, &h) ||
        !digits(t + 14, 2, &mi) || !digits(t + 17, 2, &s))
        return 0;
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (y < 1 || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 59) return 0;
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (d > mdays[mo - 1] + (mo == 2 && leap)) return 0;
    *secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s;
    return 1;
}

/* Epoch seconds of an emitter timestamp YYYY-MM-DDTHH:MM:SS.mmmZ and its milliseconds;
 * 0 when it is not exactly that shape of a real UTC time (Python then decides). ``f``
 * remembers the last whole second read (NULL: none). */
static int emitter_ts(Folder *f, const char *t, Py_ssize_t n, int64_t *secs, int *ms) {
    if (n != 24 || t[19] != '.' || t[23] != 'Z') return 0;
    if (!digits(t + 20, 3, ms)) return 0;
    if (f && f->sec_valid && memcmp(f->sec_bytes, t, 19) == 0) { *secs = f->sec_value; return 1; }
    if (!whole_second(t, secs)) return 0;
    if (f) { memcpy(f->sec_bytes, t, 19); f->sec_value = *secs; f->sec_valid = 1; }
    return 1;
}

static uint64_t mono_offset_of_digits(const char *p, Py_ssize_t n) {
    /* mono_ns + 2**63, clamped, from the canonical integer's digits. */
    int neg = n > 0 && p[0] == '-';
    uint64_t v = 0;
    int over = 0;
    for (Py_ssize_t i = neg; i < n; i++) {
        unsigned d = (unsigned)(p[i] - '0');
        if (v > (UINT64_MAX - d) / 10) { over = 1; break; }
        v = v * 10 + d;
    }
    const uint64_t half = (uint64_t)1 << 63;
    if (neg) return (over || v > half) ? 0 : half - v;
    return (over || v > half - 1) ? UINT64_MAX : half + v;
}

static uint64_t mono_offset_of(PyObject *mono) {
    const uint64_t half = (uint64_t)1 << 63;
    if (mono == NULL || !PyLong_CheckExact(mono)) return half;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(mono, &overflow);
    if (overflow > 0) return UINT64_MAX;
    if (overflow < 0) return 0;
    if (v == -1 && PyErr_Occurred()) { PyErr_Clear(); return half; }
    return (uint64_t)v + half;
}

static PyObject *key_object(Key k) {
    PyObject *hi = PyLong_FromLongLong(k.us), *lo = PyLong_FromUnsignedLongLong(k.off), *sh = PyLong_FromLong(64);
    PyObject *out = NULL, *shifted = NULL;
    if (hi && lo && sh && (shifted = PyNumber_Lshift(hi, sh))) out = PyNumber_Add(shifted, lo);
    Py_XDECREF(hi); Py_XDECREF(lo); Py_XDECREF(sh); Py_XDECREF(shifted);
    return out;
}

/* The facts of a time not in the emitter's shape, from Python: (canonical bytes or None,
 * microseconds or None); the offset is mono_ns's. */
typedef struct TsFacts {
    int canonical_ok;
    char canonical[24];
    int has_key;
    Key key;
} TsFacts;

static int python_ts_facts(Folder *f, const char *t, Py_ssize_t n, uint64_t off, TsFacts *out) {
    PyObject *r = PyObject_CallFunction(f->ts_facts, "y#", t, n);
    if (!r) return -1;
    PyObject *canon, *us;
    if (!PyArg_ParseTuple(r, "OO", &canon, &us)) { Py_DECREF(r); return -1; }
    out->canonical_ok = 0;
    if (PyBytes_Check(canon) && PyBytes_GET_SIZE(canon) == 24) {
        memcpy(out->canonical, PyBytes_AS_STRING(canon), 24);
        out->canonical_ok = 1;
    }
    out->has_key = us != Py_None;
    out->key.us = 0; out->key.off = off; /* never read without has_key; never left unset either */
    if (out->has_key) {
        out->key.us = PyLong_AsLongLong(us);
        out->key.off = off;
        if (PyErr_Occurred()) { Py_DECREF(r); return -1; }
    }
    Py_DECREF(r);
    return 0;
}

/* -- name table --------------------------------------------------------------------- */
static void names_clear(NameTable *t) {
    for (Py_ssize_t i = 0; i < t->cap; i++) {
        Name *n = t->slots[i];
        if (n) { Py_XDECREF(n->str); PyMem_Free(n->bytes); PyMem_Free(n); }
    }
    PyMem_Free(t->slots);
    t->slots = NULL; t->cap = t->used = 0;
}

static int names_grow(NameTable *t) {
    Py_ssize_t cap = t->cap ? t->cap * 2 : 256;
    Name **slots = PyMem_Calloc(cap, sizeof(Name *));
    if (!slots) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; i < t->cap; i++) {
        Name *n = t->slots[i];
        if (!n) continue;
        Py_ssize_t j = n->hash & (cap - 1);
        while (slots[j]) j = (j + 1) & (cap - 1);
        slots[j] = n;
    }
    PyMem_Free(t->slots);
    t->slots = slots; t->cap = cap;
    return 0;
}

static int layer_class_of(const char *p, Py_ssize_t n, int *known) {
    *known = 1;
    if (n == 7 && memcmp(p, "backend", 7) == 0) return LAYER_BACKEND;
    if (n == 5 && memcmp(p, "probe", 5) == 0) return LAYER_PROBE;
    if (n == 6 && memcmp(p, "aimock", 6) == 0) return LAYER_AIMOCK;
    *known = 0;
    return LAYER_OTHER;
}

/* The entry of boundary ``p[:n]`` (UTF-8), asking Python about a name met the first time. */
static Name *name_of(Folder *f, const char *p, Py_ssize_t n) {
    NameTable *t = &f->names;
    uint64_t h = fnv(p, n);
    if (t->cap) {
        Py_ssize_t j = h & (t->cap - 1);
        for (Name *e; (e = t->slots[j]); j = (j + 1) & (t->cap - 1))
            if (e->hash == h && e->len == n && memcmp(e->bytes, p, n) == 0) return e;
    }
    if (t->used >= NAME_TABLE_MAX) names_clear(t); /* a log that invents names: start again */
    if ((t->used + 1) * 2 > t->cap && names_grow(t) < 0) return NULL;
    Name *e = PyMem_Calloc(1, sizeof(Name));
    if (!e) { PyErr_NoMemory(); return NULL; }
    e->bytes = PyMem_Malloc(n + 1);
    if (!e->bytes) { PyMem_Free(e); PyErr_NoMemory(); return NULL; }
    memcpy(e->bytes, p, n); e->bytes[n] = 0; e->len = n; e->hash = h;
    e->str = PyUnicode_DecodeUTF8(p, n, "replace");
    PyObject *b = PyBytes_FromStringAndSize(p, n);
    PyObject *info = (e->str && b) ? PyObject_CallOneArg(f->boundary_info, b) : NULL;
    int ok = info && PyArg_ParseTuple(info, "pi", &e->plain, &e->counter);
    PyObject *bit = ok ? PyDict_GetItemWithError(f->terminal_bits, b) : NULL;
    Py_XDECREF(info);
    if (!ok || PyErr_Occurred()) { Py_XDECREF(b); Py_XDECREF(e->str); PyMem_Free(e->bytes); PyMem_Free(e); return NULL; }
    e->terminal_bit = bit ? (int)PyLong_AsLong(bit) : 0;
    Py_DECREF(b);
    PyUnicode_InternInPlace(&e->str);
    if (e->counter >= f->n_counters) e->counter = -1;
    e->accounting = n >= f->accounting_len && memcmp(p, f->accounting, f->accounting_len) == 0;
    e->llm_response = n == f->llm_response_len && memcmp(p, f->llm_response, n) == 0;
    const char *dot = memchr(p, '.', n);
    int known;
    e->layer_class = layer_class_of(p, dot ? dot - p : n, &known);
    Py_ssize_t j = h & (t->cap - 1);
    while (t->slots[j]) j = (j + 1) & (t->cap - 1);
    t->slots[j] = e; t->used++;
    return e;
}

/* -- test ids ------------------------------------------------------------------------ */
static int tids_grow(Folder *f) {
    Py_ssize_t cap = f->tids_cap ? f->tids_cap * 2 : 1024;
    TidEntry *tids = PyMem_Calloc(cap, sizeof(TidEntry));
    if (!tids) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; i < f->tids_cap; i++) {
        TidEntry *e = &f->tids[i];
        if (!e->bytes) continue;
        Py_ssize_t j = e->hash & (cap - 1);
        while (tids[j].bytes) j = (j + 1) & (cap - 1);
        tids[j] = *e;
    }
    PyMem_Free(f->tids);
    f->tids = tids; f->tids_cap = cap;
    return 0;
}

/* The slots are kept in chunks: a doubled array would copy every slot at each growth and
 * leave the old array free in the heap, as much again in resident memory (tens of MB on
 * a log of 30k tests). */
static int slot_new(Folder *f, int ev) {
    if (f->n_slots == f->cap_slots) {
        Py_ssize_t n_chunks = f->cap_slots / SLOT_CHUNK;
        if ((n_chunks & (n_chunks - 1)) == 0) { /* the table of chunks is full at each power of two */
            Slot **t = PyMem_Realloc(f->slots, (n_chunks ? 2 * n_chunks : 1) * sizeof(Slot *));
            if (!t) { PyErr_NoMemory(); return -1; }
            f->slots = t;
        }
        Slot *chunk = chunk_new();
        if (!chunk) { PyErr_NoMemory(); return -1; }
        f->slots[n_chunks] = chunk;
        f->cap_slots += SLOT_CHUNK;
    }
    Slot *s = SLOT(f, f->n_slots);
    memset(s, 0, sizeof(Slot));
    s->ev = ev;
    return (int)f->n_slots++;
}

/* The slot of test id ``p[:n]``: >= 0, T_SKIP (not this pass's, or not kept) or
 * T_UNTRACKED (past max_tests: counted, left out); -3 on a Python error. */
static Py_ssize_t slot_of(Folder *f, const char *p, Py_ssize_t n, PyObject *tid_obj) {
    uint64_t h = fnv(p, n);
    TidEntry *e = NULL;
    if (f->tids_cap) {
        Py_ssize_t j = h & (f->tids_cap - 1);
        for (; f->tids[j].bytes; j = (j + 1) & (f->tids_cap - 1)) {
            TidEntry *c = &f->tids[j];
            if (c->hash == h && c->len == n && memcmp(c->bytes, p, n) == 0) { e = c; break; }
        }
    }
    if (e) {
        if (e->slot >= 0 && f->fold_aggs && !SLOT(f, e->slot)->agg_on && f->n_aggs >= f->max_tests) {
            f->untracked++; /* admitted, never folded (a bad ts), and the rows are full */
            return T_UNTRACKED;
        }
        if (e->slot == T_UNTRACKED) f->untracked++;
        return e->slot;
    }
    int full = f->fold_aggs && f->n_aggs >= f->max_tests;
    PyObject *tid = tid_obj;
    if (tid) Py_INCREF(tid); else tid = PyBytes_FromStringAndSize(p, n);
    if (!tid) return -3;
    PyObject *r = PyObject_CallFunction(f->admit, "Oi", tid, full);
    Py_DECREF(tid);
    if (!r) return -3;
    long code = PyLong_AsLong(r);
    Py_DECREF(r);
    if (code == -1 && PyErr_Occurred()) return -3;
    Py_ssize_t slot;
    if (code == T_SKIP || code == T_UNTRACKED) {
        slot = code;
        if (slot == T_UNTRACKED) f->untracked++;
        /* ids of no slot are remembered up to a bound: a log of endless made-up ids asks again */
        if (f->tids_used >= 4 * f->max_tests + 4096) return slot;
    } else if ((slot = slot_new(f, (int)(code & 2) != 0)) < 0) return -3;
    if ((f->tids_used + 1) * 2 > f->tids_cap && tids_grow(f) < 0) return -3;
    Py_ssize_t j = h & (f->tids_cap - 1);
    while (f->tids[j].bytes) j = (j + 1) & (f->tids_cap - 1);
    e = &f->tids[j];
    e->bytes = PyMem_Malloc(n ? n : 1);
    if (!e->bytes) { PyErr_NoMemory(); return -3; }
    memcpy(e->bytes, p, n); e->len = n; e->hash = h; e->slot = slot;
    f->tids_used++;
    return slot;
}

/* One bytes object for ``p[:n]`` shared by every test that names it (a layer, a slug),
 * up to a bound; past it each test gets its own. */
static PyObject *shared_bytes(Folder *f, const char *p, Py_ssize_t n) {
    PyObject *b = PyBytes_FromStringAndSize(p, n);
    if (!b || PyDict_GET_SIZE(f->shared) >= 4096) return b;
    PyObject *kept = PyDict_SetDefault(f->shared, b, b);
    Py_XINCREF(kept);
    Py_DECREF(b);
    return kept;
}

/* -- the row (fold.Fold.fold) ------------------------------------------------------- */
static int outcome_failed(Folder *f, const char *p, Py_ssize_t n) {
    for (int i = 0; i < f->n_failed; i++)
        if (f->failed_lens[i] == n && memcmp(f->failed[i], p, n) == 0) return 1;
    return 0;
}

static int agg_fold(Folder *f, Slot *s, const char *ts24, const char *layer, Py_ssize_t layer_len, Name *b,
                    const char *slug, Py_ssize_t slug_len, int failed) {
    if (!s->agg_on) {
        s->agg_on = 1; s->agg_order = f->n_aggs++;
        memcpy(s->first, ts24, 24); memcpy(s->last, ts24, 24);
    } else if (memcmp(ts24, s->first, 24) < 0) memcpy(s->first, ts24, 24);
    else if (memcmp(ts24, s->last, 24) > 0) memcpy(s->last, ts24, 24);
    s->a_events++;
    if (failed) s->failed = 1;
    if (b->accounting) return 0;
    Py_ssize_t i;
    for (i = 0; i < s->n_layers; i++)
        if (PyBytes_GET_SIZE(s->layers[i]) == layer_len && memcmp(PyBytes_AS_STRING(s->layers[i]), layer, layer_len) == 0)
            break;
    if (i == s->n_layers) {
        if (s->n_layers == s->cap_layers) {
            Py_ssize_t cap = s->cap_layers ? s->cap_layers * 2 : 2;
            PyObject **l = PyMem_Realloc(s->layers, cap * sizeof(PyObject *));
            if (!l) { PyErr_NoMemory(); return -1; }
            s->layers = l; s->cap_layers = cap;
        }
        if (!(s->layers[s->n_layers] = shared_bytes(f, layer, layer_len))) return -1;
        s->n_layers++;
    }
    if (s->n_slugs < MAX_SLUGS) {
        for (i = 0; i < s->n_slugs; i++)
            if (PyBytes_GET_SIZE(s->slugs[i]) == slug_len && memcmp(PyBytes_AS_STRING(s->slugs[i]), slug, slug_len) == 0)
                break;
        if (i == s->n_slugs) {
            if (!(s->slugs[s->n_slugs] = shared_bytes(f, slug, slug_len))) return -1;
            s->n_slugs++;
        }
    }
    if (layer_len == 7 && memcmp(layer, "backend", 7) == 0) s->flags |= f->backend_bit | b->terminal_bit;
    return 0;
}

static uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static int64_t unzigzag(uint64_t u) { return (int64_t)(u >> 1) ^ -(int64_t)(u & 1); }

static uint8_t *put_varint(uint8_t *p, uint64_t v) {
    for (; v >= 0x80; v >>= 7) *p++ = (uint8_t)(v | 0x80);
    *p++ = (uint8_t)v;
    return p;
}

/* A place packed as varints, told from the one before (unpack_places reads them back):
 * (start - the last end) * 2 within the same block, else (block - the last block) * 2 + 1
 * and then the start; then end - start. Signed steps are zigzagged, so any order packs. */
#define PLACE_MAX_BYTES 15 /* three varints of at most 34 bits */
static int keep_place(Folder *f, Slot *s, int64_t block, Py_ssize_t ls, Py_ssize_t le) {
    /* past the first keep_lines, or where no int32 reaches (never, with blocks of MBs): counted */
    if (s->n_places >= f->keep_lines || block > INT32_MAX || le > INT32_MAX || ls > le) { s->more++; return 0; }
    if (s->cap_places - s->places_len < PLACE_MAX_BYTES) {
        Py_ssize_t cap = s->cap_places ? s->cap_places + s->cap_places / 2 : 32; /* less slack than doubling */
        uint8_t *p = PyMem_Realloc(s->places, cap);
        if (!p) { PyErr_NoMemory(); return -1; }
        s->places = p; s->cap_places = cap;
    }
    uint8_t *p = s->places + s->places_len;
    if (block == s->place_block) {
        p = put_varint(p, zigzag(ls - s->place_end) << 1);
    } else {
        p = put_varint(p, zigzag(block - s->place_block) << 1 | 1);
        p = put_varint(p, (uint64_t)ls);
    }
    p = put_varint(p, (uint64_t)(le - ls));
    s->places_len = p - s->places;
    s->n_places++;
    s->place_block = block; s->place_end = le;
    return 0;
}

/* -- the diagnosis head (Evidence._fold_head) --------------------------------------- */
static void ts_set(TsRef *r, const TsRef *src) {
    if (r->kind == 2) Py_CLEAR(r->obj);
    *r = *src;
    if (r->kind == 2) Py_INCREF(r->obj);
}

static void pick_set(PickRef *p, int has_key, Key key, const TsRef *ts, Name *b) {
    p->set = 1; p->has_key = has_key; p->key = key;
    ts_set(&p->ts, ts);
    if (p->boundary != b->str) { Py_XSETREF(p->boundary, Py_NewRef(b->str)); }
}

static int names_equal(PyObject *a, PyObject *b) {
    return a == b || PyUnicode_Compare(a, b) == 0;
}

static int ev_head(Slot *s, Name *b, int layer_class, int failed, int has_key, Key key, const TsRef *ts) {
    s->events++;
    int i = s->hint;
    if (!(i < s->n_bc && s->bc[i].name == b->str)) {
        for (i = 0; i < s->n_bc; i++)
            if (names_equal(s->bc[i].name, b->str)) break;
    }
    if (i < s->n_bc) { s->bc[i].count++; s->hint = i; }
    else if (s->n_bc < MAX_BOUNDARY_NAMES) {
        if (s->n_bc == s->cap_bc) {
            int cap = s->cap_bc + 4; /* a test meets about ten names: little to spare per test */
            BCount *bc = PyMem_Realloc(s->bc, cap * sizeof(BCount));
            if (!bc) { PyErr_NoMemory(); return -1; }
            s->bc = bc; s->cap_bc = cap;
        }
        s->bc[s->n_bc].name = Py_NewRef(b->str);
        s->bc[s->n_bc].count = 1;
        s->hint = s->n_bc++;
    } else s->other_names++;
    if (b->accounting) return 0;
    s->lay[layer_class]++;
    if (failed) s->failures++;
    if (!s->first_pick.set || (has_key && (!s->first_pick.has_key || key_lt(key, s->first_pick.key))))
        pick_set(&s->first_pick, has_key, key, ts, b);
    if (!s->last_pick.set || (has_key && (!s->last_pick.has_key || !key_lt(key, s->last_pick.key))))
        pick_set(&s->last_pick, has_key, key, ts, b);
    if (layer_class == LAYER_BACKEND &&
        (!s->backend_pick.set || (has_key && (!s->backend_pick.has_key || !key_lt(key, s->backend_pick.key)))))
        pick_set(&s->backend_pick, has_key, key, ts, b);
    if (b->counter >= 0) s->counters[b->counter]++;
    return 0;
}

static int ts_facts_of(Folder *f, const char *t, Py_ssize_t n, uint64_t off, TsFacts *out);

static int utf8_of(PyObject *o, const char **p, Py_ssize_t *n) {
    if (!PyUnicode_Check(o)) return 0;
    *p = PyUnicode_AsUTF8AndSize(o, n);
    if (!*p) { PyErr_Clear(); return 0; }
    return 1;
}

/* Evidence._fold_head of a parsed envelope: its own fields, whatever their types. */
static int ev_head_env(Folder *f, Slot *s, PyObject *env) {
    PyObject *bnd_o = PyDict_GetItemWithError(env, f->k_boundary);
    const char *bnd, *text;
    Py_ssize_t bnd_n, text_n;
    if (!bnd_o || !PyUnicode_CheckExact(bnd_o) || !utf8_of(bnd_o, &bnd, &bnd_n)) {
        if (PyErr_Occurred()) return -1;
        s->skipped++;
        return 0;
    }
    Name *b = name_of(f, bnd, bnd_n);
    if (!b) return -1;
    PyObject *layer_o = PyDict_GetItemWithError(env, f->k_layer);
    PyObject *outcome_o = PyDict_GetItemWithError(env, f->k_outcome);
    PyObject *ts_o = PyDict_GetItemWithError(env, f->k_ts);
    PyObject *mono_o = PyDict_GetItemWithError(env, f->k_mono);
    if (PyErr_Occurred()) return -1;
    int known = 0, lc = LAYER_OTHER;
    if (layer_o && PyUnicode_CheckExact(layer_o) && utf8_of(layer_o, &text, &text_n)) lc = layer_class_of(text, text_n, &known);
    if (!known) lc = b->layer_class;
    int failed = outcome_o && PyUnicode_CheckExact(outcome_o) && utf8_of(outcome_o, &text, &text_n) &&
                 outcome_failed(f, text, text_n);
    TsFacts tf = {0};
    TsRef ref = {0};
    tf.has_key = 0;
    if (ts_o && PyUnicode_CheckExact(ts_o) && utf8_of(ts_o, &text, &text_n)) {
        if (ts_facts_of(f, text, text_n, mono_offset_of(mono_o), &tf) < 0) return -1;
        if (tf.has_key) { ref.kind = 2; ref.obj = ts_o; } /* borrowed: a pick takes its own reference */
    }
    return ev_head(s, b, lc, failed, tf.has_key, tf.key, &ref);
}

/* -- the head of a canonical line --------------------------------------------------- */
typedef struct {
    Py_ssize_t a[N_CAPTURES], n[N_CAPTURES];
    Py_ssize_t end;
    Py_ssize_t va[MAX_FIELDS], ve[MAX_FIELDS]; /* every field's value text */
    Py_ssize_t num_a, num_n; /* the duration's field (ROLE_DURATION): its text, n 0 for null */
    int long_int; /* an integer of more than 18 digits: JSON may read it as a float */
    unsigned char high; /* the bytes of its strings OR-ed: bit 7 set for a byte past ASCII */
} Head;

/* A JSON string without escapes at buf[*i]: *i moved past it, 1; 0 for anything else.
 * Sixteen bytes at a time where SSE2 is (every x86-64): a head's strings are most of it. */
static int match_string(const char *buf, Py_ssize_t *i, Py_ssize_t le, Head *h) {
    if (*i >= le || buf[*i] != '"') return 0;
    Py_ssize_t j = *i + 1;
    unsigned char high = 0;
#ifdef CVDIAG_SSE2
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), control = _mm_set1_epi8(0x1f);
    for (; j + 16 <= le; j += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(buf + j));
        __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                                    _mm_cmpeq_epi8(_mm_min_epu8(v, control), v)); /* '"', '\\' or below 0x20 */
        unsigned stops = (unsigned)_mm_movemask_epi8(stop), highs = (unsigned)_mm_movemask_epi8(v);
        if (stops) {
            unsigned k = (unsigned)__builtin_ctz(stops);
            if (highs & ((1u << k) - 1)) high = 0x80;
            j += k;
            break;
        }
        if (highs) high = 0x80;
    }
#endif
    while (j < le) {
        unsigned char c = (unsigned char)buf[j];
        if (c == '"') { *i = j + 1; h->high |= high; return 1; }
        if (c == '\\' || c < 0x20) return 0;
        high |= c;
        j++;
    }
    return 0;
}

static int match_int(const char *buf, Py_ssize_t *i, Py_ssize_t le, Head *h) {
    Py_ssize_t j = *i;
    if (j < le && buf[j] == '-') j++;
    if (j >= le || buf[j] < '0' || buf[j] > '9') return 0;
    Py_ssize_t d0 = j;
    if (buf[j] == '0') j++;
    else while (j < le && buf[j] >= '0' && buf[j] <= '9') j++;
    if (j - d0 > 18) h->long_int = 1;
    *i = j;
    return 1;
}

/* Whether buf[i:le] starts with the field's name: with SSE2, in two 16-byte comparisons
 * rather than a call of memcmp per field (16 a head), where the line has the room. */
static ALWAYS_INLINE int starts_name(const char *buf, Py_ssize_t i, Py_ssize_t le, const Field *fd) {
#ifdef CVDIAG_SSE2
    if (fd->need && i >= 0 && i + NAME_ROOM <= le) {
        __m128i lo = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(buf + i)), _mm_loadu_si128((const __m128i *)fd->padded));
        __m128i hi = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(buf + i + 16)),
                                    _mm_loadu_si128((const __m128i *)(fd->padded + 16)));
        uint32_t eq = (uint32_t)_mm_movemask_epi8(lo) | (uint32_t)_mm_movemask_epi8(hi) << 16;
        return (eq & fd->need) == fd->need;
    }
#endif
    return starts(buf, i, le, fd->name, fd->name_len);
}

/* Whether buf[pos:le] starts with the canonical head, its captures (and, with ``spans``,
 * every field's value) noted in h. Inlined twice, so the pass pays nothing for spans. */
static ALWAYS_INLINE int match_head_spans(Folder *f, const char *buf, Py_ssize_t pos, Py_ssize_t le, Head *h, int spans) {
    Py_ssize_t i = pos;
    h->long_int = 0; h->num_a = h->num_n = 0; h->high = 0;
    for (int k = 0; k < f->n_fields; k++) {
        Field *fd = &f->fields[k];
        if (!starts_name(buf, i, le, fd)) return 0;
        i += fd->name_len;
        if (spans) h->va[k] = i;
        switch (fd->kind) {
        case K_LITERAL: /* one byte in the emitter's layout ("1", "{"): no call for it */
            if (fd->literal_len == 1 ? i >= le || buf[i] != fd->literal[0] : !starts(buf, i, le, fd->literal, fd->literal_len))
                return 0;
            i += fd->literal_len;
            break;
        case K_CAPTURE_STR: { /* the layout gave it a role below N_CAPTURES (Folder_init) */
            Py_ssize_t a = i;
            if (!match_string(buf, &i, le, h)) return 0;
            h->a[fd->role] = a + 1; h->n[fd->role] = i - a - 2;
            break;
        }
        case K_STR:
            if (!match_string(buf, &i, le, h)) return 0;
            break;
        case K_NULL_OR_STR:
            if (starts(buf, i, le, "null", 4)) i += 4;
            else if (!match_string(buf, &i, le, h)) return 0;
            break;
        case K_CAPTURE_INT: {
            Py_ssize_t a = i;
            if (!match_int(buf, &i, le, h)) return 0;
            h->a[fd->role] = a; h->n[fd->role] = i - a;
            break;
        }
        case K_NULL_OR_INT: {
            Py_ssize_t a = i;
            if (starts(buf, i, le, "null", 4)) i += 4;
            else if (!match_int(buf, &i, le, h)) return 0;
            if (fd->role == ROLE_DURATION) { h->num_a = a; h->num_n = buf[a] == 'n' ? 0 : i - a; }
            break;
        }
        }
        if (spans) h->ve[k] = i;
    }
    h->end = i;
    return 1;
}

static int match_head(Folder *f, const char *buf, Py_ssize_t pos, Py_ssize_t le, Head *h) {
    return match_head_spans(f, buf, pos, le, h, 0);
}

static int is_ascii(const char *p, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if ((unsigned char)p[i] >= 0x80) return 0;
    return 1;
}

/* -- JSON that is certainly an object -------------------------------------------------
 * A strict subset of JSON (ASCII strings with the short escapes, integers of up to 18
 * digits and plain decimals, literals, nesting up to 64): what it accepts orjson accepts
 * as an object too. Anything outside it is not refused here but left to orjson. */
#define JSON_UNSURE (-1)

static int json_ws(const char *p, Py_ssize_t *i, Py_ssize_t b) {
    while (*i < b && (p[*i] == ' ' || p[*i] == '\t' || p[*i] == '\n' || p[*i] == '\r')) (*i)++;
    return *i < b;
}

static int json_value(const char *p, Py_ssize_t *i, Py_ssize_t b, int depth);

/* An ASCII JSON string at p[*i] with only the escapes \" \\ \b \f \n \r \t (and \/ unless
 * ``as_orjson_writes``: orjson writes it as /): 1 with *i past it, else 0. */
static int ascii_string(const char *p, Py_ssize_t *i, Py_ssize_t b, int as_orjson_writes) {
    Py_ssize_t j = *i + 1; /* p[*i] is the quote */
    while (j < b) {
        unsigned char c = (unsigned char)p[j];
        if (c == '"') { *i = j + 1; return 1; }
        if (c < 0x20 || c >= 0x80) return 0;
        if (c == '\\') {
            char e = j + 1 < b ? p[j + 1] : 0;
            if (!(e == '"' || e == '\\' || (e == '/' && !as_orjson_writes) || e == 'b' || e == 'f' || e == 'n' ||
                  e == 'r' || e == 't'))
                return 0;
            j += 2;
            continue;
        }
        j++;
    }
    return 0;
}

static int json_string(const char *p, Py_ssize_t *i, Py_ssize_t b) {
    return ascii_string(p, i, b, 0) ? 1 : JSON_UNSURE; /* \u and the rest: orjson's to judge */
}

static int json_number(const char *p, Py_ssize_t *i, Py_ssize_t b) {
    Py_ssize_t j = *i;
    if (j < b && p[j] == '-') j++;
    Py_ssize_t d0 = j;
    if (j < b && p[j] == '0') j++;
    else while (j < b && p[j] >= '0' && p[j] <= '9') j++;
    if (j == d0 || j - d0 > 18) return JSON_UNSURE;
    if (j < b && p[j] == '.') {
        Py_ssize_t f0 = ++j;
        while (j < b && p[j] >= '0' && p[j] <= '9') j++;
        if (j == f0) return JSON_UNSURE;
    }
    if (j < b && (p[j] == 'e' || p[j] == 'E')) return JSON_UNSURE; /* an exponent may overflow */
    *i = j;
    return 1;
}

static int json_container(const char *p, Py_ssize_t *i, Py_ssize_t b, int depth, char close) {
    if (depth > 64) return JSON_UNSURE;
    (*i)++;
    if (!json_ws(p, i, b)) return JSON_UNSURE;
    if (p[*i] == close) { (*i)++; return 1; }
    for (;;) {
        if (close == '}') {
            if (p[*i] != '"' || json_string(p, i, b) != 1 || !json_ws(p, i, b) || p[*i] != ':') return JSON_UNSURE;
            (*i)++;
        }
        if (!json_ws(p, i, b) || json_value(p, i, b, depth + 1) != 1 || !json_ws(p, i, b)) return JSON_UNSURE;
        if (p[*i] == close) { (*i)++; return 1; }
        if (p[*i] != ',') return JSON_UNSURE;
        (*i)++;
        if (!json_ws(p, i, b)) return JSON_UNSURE;
    }
}

static int json_value(const char *p, Py_ssize_t *i, Py_ssize_t b, int depth) {
    char c = p[*i];
    if (c == '{') return json_container(p, i, b, depth, '}');
    if (c == '[') return json_container(p, i, b, depth, ']');
    if (c == '"') return json_string(p, i, b);
    if (c == '-' || (c >= '0' && c <= '9')) return json_number(p, i, b);
    if (starts(p, *i, b, "true", 4)) { *i += 4; return 1; }
    if (starts(p, *i, b, "false", 5)) { *i += 5; return 1; }
    if (starts(p, *i, b, "null", 4)) { *i += 4; return 1; }
    return JSON_UNSURE;
}

/* 1 when buf[a:b] is certainly one JSON object (and nothing else but white space). */
static int certainly_object(const char *buf, Py_ssize_t a, Py_ssize_t b) {
    Py_ssize_t i = a;
    if (!json_ws(buf, &i, b) || buf[i] != '{' || json_container(buf, &i, b, 0, '}') != 1) return 0;
    json_ws(buf, &i, b);
    return i == b;
}

/* JSON shorter than this cannot nest as deep as orjson refuses (1024 levels, 2 bytes each) */
#define DEEP_ROOM 2048

/* orjson.loads of the metadata buf[a:b] as the whole line reads it: one level down, inside
 * the envelope's object, so metadata that orjson reads alone but not inside the envelope
 * (nested 1024 deep) is refused here too (fold._metadata_json). A new reference, or NULL
 * with the error of loads (or of memory) set. */
static PyObject *load_metadata(Folder *f, const char *buf, Py_ssize_t a, Py_ssize_t b) {
    if (b - a < DEEP_ROOM) {
        PyObject *view = PyMemoryView_FromMemory((char *)buf + a, b - a, PyBUF_READ);
        PyObject *v = view ? PyObject_CallOneArg(f->loads, view) : NULL;
        Py_XDECREF(view);
        return v;
    }
    PyObject *raw = PyBytes_FromStringAndSize(NULL, b - a + 2);
    if (!raw) return NULL;
    char *r = PyBytes_AS_STRING(raw);
    r[0] = '[';
    memcpy(r + 1, buf + a, b - a);
    r[b - a + 1] = ']';
    PyObject *list = PyObject_CallOneArg(f->loads, raw);
    Py_DECREF(raw);
    if (!list) return NULL;
    PyObject *v = PyList_Check(list) && PyList_GET_SIZE(list) == 1 ? Py_NewRef(PyList_GET_ITEM(list, 0)) : NULL;
    Py_DECREF(list);
    if (!v) PyErr_SetString(PyExc_ValueError, "not one JSON value");
    return v;
}

/* type(orjson.loads(buf[a:b])) is dict, read as the whole line reads it, without raising */
static int is_object(Folder *f, const char *buf, Py_ssize_t a, Py_ssize_t b) {
    if (certainly_object(buf, a, b)) return 1;
    while (a < b && (buf[a] == ' ' || buf[a] == '\t' || buf[a] == '\n' || buf[a] == '\r')) a++;
    if (a >= b || buf[a] != '{') return 0; /* JSON that is no object, or no JSON */
    PyObject *v = load_metadata(f, buf, a, b);
    if (!v) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError)) return -1;
        PyErr_Clear();
        return 0;
    }
    int ok = PyDict_CheckExact(v);
    Py_DECREF(v);
    return ok;
}

static int tail_ok(Folder *f, const char *buf, Py_ssize_t le) {
    if (le >= f->tail_lens[0] && memcmp(buf + le - f->tail_lens[0], f->tails[0], f->tail_lens[0]) == 0) return 1;
    Py_ssize_t lo = le - f->tail_room < 0 ? 0 : le - f->tail_room;
    Py_ssize_t e = le;
    while (e > lo) {
        char c = buf[e - 1];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\x0b' || c == '\x0c') e--;
        else break;
    }
    for (int k = 0; k < 2; k++)
        if (e - lo >= f->tail_lens[k] && memcmp(buf + e - f->tail_lens[k], f->tails[k], f->tail_lens[k]) == 0) return 1;
    return 0;
}

/* The time facts of ts ``t[:n]`` (UTF-8) with mono offset ``off``: 0, or -1 on error. */
static int ts_facts_of(Folder *f, const char *t, Py_ssize_t n, uint64_t off, TsFacts *out) {
    int64_t secs; int ms;
    if (emitter_ts(f, t, n, &secs, &ms)) {
        out->canonical_ok = 1; memcpy(out->canonical, t, 24);
        out->has_key = 1; out->key.us = secs * 1000000 + (int64_t)ms * 1000; out->key.off = off;
        return 0;
    }
    return python_ts_facts(f, t, n, off, out);
}

/* The time of a head's ts as the picks keep it: the 24 bytes, a str, or none. */
static int head_ts_ref(const char *t, Py_ssize_t n, const TsFacts *tf, TsRef *ref) {
    ref->obj = NULL;
    if (!tf->has_key) { ref->kind = 0; return 0; }
    if (n == 24 && is_ascii(t, 24)) { ref->kind = 1; memcpy(ref->b, t, 24); return 0; }
    ref->kind = 2;
    return (ref->obj = PyUnicode_DecodeUTF8(t, n, "replace")) ? 0 : -1;
}

/* Whether a canonical line is in the emitter's plain layout: all-null edge headers, the
 * fixed tail, an ASCII head (valid UTF-8) and metadata that is a JSON object, so it is
 * certainly valid JSON with no key twice at its top. 1 yes, 0 no, -1 error. plain_frame
 * checks all but the metadata. */
static ALWAYS_INLINE int plain_frame(Folder *f, const char *buf, const Head *h, Py_ssize_t le) {
    Py_ssize_t md = h->end + f->middle_len, md_end = le - f->end_len;
    return md <= md_end && memcmp(buf + h->end, f->middle, f->middle_len) == 0 &&
           memcmp(buf + md_end, f->end, f->end_len) == 0 && !(h->high & 0x80); /* an ASCII head: the rest of it is */
}

static int plain_shaped(Folder *f, const char *buf, const Head *h, Py_ssize_t le) {
    return plain_frame(f, buf, h, le) ? is_object(f, buf, h->end + f->middle_len, le - f->end_len) : 0;
}

/* Whether a canonical line of boundary ``b`` says nothing beyond its head: a boundary whose
 * head says all, in the plain layout. 1 yes, 0 no, -1 error. */
static int plain_line(Folder *f, const char *buf, const Head *h, const Name *b, Py_ssize_t le) {
    return b->plain ? plain_shaped(f, buf, h, le) : 0;
}

/* -- count mode (stats): envelopes per (slug, boundary, outcome) ------------------- */
/* Count a canonical line in C when it is certainly a valid envelope that says nothing
 * beyond its head (no metadata to read, a time, integers JSON reads as integers): 1
 * counted, 0 for Python to read, -1 error. */
static int count_line(Folder *f, const char *buf, Head *h, Py_ssize_t le) {
    Name *b = name_of(f, buf + h->a[ROLE_BOUNDARY], h->n[ROLE_BOUNDARY]);
    if (!b) return -1;
    int64_t secs; int ms;
    if (h->long_int || !emitter_ts(f, buf + h->a[ROLE_TS], h->n[ROLE_TS], &secs, &ms)) return 0;
    int o = plain_line(f, buf, h, b, le);
    if (o <= 0) return o;
    /* the key: slug, boundary and outcome, each ended by a NUL (none of them holds one) */
    Py_ssize_t n = h->n[ROLE_SLUG] + h->n[ROLE_BOUNDARY] + h->n[ROLE_OUTCOME] + 2;
    char small[512];
    char *key = n <= (Py_ssize_t)sizeof small ? small : PyMem_Malloc(n);
    if (!key) { PyErr_NoMemory(); return -1; }
    memcpy(key, buf + h->a[ROLE_SLUG], h->n[ROLE_SLUG]); key[h->n[ROLE_SLUG]] = 0;
    memcpy(key + h->n[ROLE_SLUG] + 1, buf + h->a[ROLE_BOUNDARY], h->n[ROLE_BOUNDARY]); key[h->n[ROLE_SLUG] + 1 + h->n[ROLE_BOUNDARY]] = 0;
    memcpy(key + h->n[ROLE_SLUG] + h->n[ROLE_BOUNDARY] + 2, buf + h->a[ROLE_OUTCOME], h->n[ROLE_OUTCOME]);
    NameTable *t = &f->triples;
    uint64_t hash = fnv(key, n);
    Name *e = NULL;
    if (t->cap) {
        Py_ssize_t j = hash & (t->cap - 1);
        for (Name *c; (c = t->slots[j]); j = (j + 1) & (t->cap - 1))
            if (c->hash == hash && c->len == n && memcmp(c->bytes, key, n) == 0) { e = c; break; }
    }
    if (!e && t->used >= NAME_TABLE_MAX) { /* a log that invents names: Python counts the rest */
        if (key != small) PyMem_Free(key);
        return 0;
    }
    if (!e) {
        /* Python makes the row now, in file order (its cap on rows counts in that order) */
        PyObject *token = PyObject_CallFunction(f->pair, "y#y#y#", buf + h->a[ROLE_SLUG], h->n[ROLE_SLUG], buf + h->a[ROLE_BOUNDARY], h->n[ROLE_BOUNDARY],
                                                buf + h->a[ROLE_OUTCOME], h->n[ROLE_OUTCOME]);
        long tk = token ? PyLong_AsLong(token) : -1;
        Py_XDECREF(token);
        if (tk < 0 || ((t->used + 1) * 2 > t->cap && names_grow(t) < 0) || !(e = PyMem_Calloc(1, sizeof(Name))) ||
            !(e->bytes = PyMem_Malloc(n))) {
            if (e) PyMem_Free(e);
            if (key != small) PyMem_Free(key);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "pair() must give a token >= 0");
            return -1;
        }
        memcpy(e->bytes, key, n); e->len = n; e->hash = hash; e->counter = (int)tk;
        Py_ssize_t j = hash & (t->cap - 1);
        while (t->slots[j]) j = (j + 1) & (t->cap - 1);
        t->slots[j] = e; t->used++;
    }
    if (key != small) PyMem_Free(key);
    e->count++;
    return 1;
}

/* counts() -> [(token, envelopes)] of count mode. */
static PyObject *Folder_counts(Folder *f, PyObject *unused) {
    PyObject *out = PyList_New(0);
    for (Py_ssize_t i = 0; out && i < f->triples.cap; i++) {
        Name *e = f->triples.slots[i];
        if (!e) continue;
        PyObject *item = Py_BuildValue("(iL)", e->counter, (long long)e->count);
        if (!item || PyList_Append(out, item) < 0) { Py_XDECREF(item); Py_CLEAR(out); break; }
        Py_DECREF(item);
    }
    return out;
}

/* -- lines a wrapper wraps (colour codes, Docker json-file) ---------------------------
 * parsing.unwrap peels the wrapper before the general parser reads such a line. One is
 * read here only where that reading certainly comes to the envelope the emitter's
 * layout shows: the plain layout (no key twice, valid JSON), an emitter ts, one marker
 * and nothing before it that unwrap would take for another wrapper, no colour code in
 * the JSON or reaching into the marker. Any other is Python's, as before (line). */
#define WRAP_ROOM 256 /* bytes of colour codes and white space after a wrapped envelope's end */
#define PREFIX_ROOM 512 /* bytes before the marker of a wrapped line */

static int is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == 0x0b || c == 0x0c; }

/* The length of the colour code (parsing._ANSI) that starts at buf[i] in a line ending at
 * n, 0 for none: ESC [ parameters intermediates final, or ESC and one byte of @-Z \ ] ^ _. */
static Py_ssize_t ansi_len(const char *buf, Py_ssize_t i, Py_ssize_t n) {
    if (i + 1 >= n || buf[i] != 0x1b) return 0;
    unsigned char c = (unsigned char)buf[i + 1];
    if (c != '[') return (c >= 0x40 && c <= 0x5a) || (c >= 0x5c && c <= 0x5f) ? 2 : 0;
    Py_ssize_t j = i + 2;
    while (j < n && (unsigned char)buf[j] >= 0x30 && (unsigned char)buf[j] <= 0x3f) j++;
    while (j < n && (unsigned char)buf[j] >= 0x20 && (unsigned char)buf[j] <= 0x2f) j++;
    return j < n && (unsigned char)buf[j] >= 0x40 && (unsigned char)buf[j] <= 0x7e ? j + 1 - i : 0;
}

/* Where the JSON of the line buf[:le] ends, once unwrap took its colour codes and white
 * space: the end of a fixed tail followed by nothing else, with no ESC in the JSON
 * buf[pos_json:end]; -1 when the line ends otherwise. */
static Py_ssize_t unwrapped_end(Folder *f, const char *buf, Py_ssize_t pos_json, Py_ssize_t le) {
    Py_ssize_t lo = le - WRAP_ROOM > pos_json ? le - WRAP_ROOM : pos_json;
    const char *brace = lo < le ? memrchr(buf + lo, '}', le - lo) : NULL;
    if (!brace) return -1;
    Py_ssize_t e = brace - buf + 1;
    for (Py_ssize_t i = e; i < le;) {
        Py_ssize_t k = buf[i] == 0x1b ? ansi_len(buf, i, le) : is_ws((unsigned char)buf[i]);
        if (!k) return -1;
        i += k;
    }
    int k = 0;
    while (k < 2 && !(e - pos_json >= f->tail_lens[k] && memcmp(buf + e - f->tail_lens[k], f->tails[k], f->tail_lens[k]) == 0))
        k++;
    return k == 2 || memchr(buf + pos_json, 0x1b, e - pos_json) ? -1 : e;
}

/* Where the marker right before the head at buf[pos] starts (``CVDIAG `` or
 * ``CVDIAG_EVENT ``), or -1 when there is none. */
static Py_ssize_t marker_before(Folder *f, const char *buf, Py_ssize_t pos) {
    if (pos >= f->prefix_len && memcmp(buf + pos - f->prefix_len, f->prefix, f->prefix_len) == 0)
        return pos - f->prefix_len;
    if (pos >= f->jprefix_len && memcmp(buf + pos - f->jprefix_len, f->jprefix, f->jprefix_len) == 0)
        return pos - f->jprefix_len;
    return -1;
}

/* Whether the text buf[ls:ms] before a wrapped line's marker, colour codes taken out as
 * unwrap takes them (one pass, left to right), leaves the marker at ms the first one of
 * the line, and starts with nothing unwrap reads as another wrapper (Docker's "{", a CRI
 * time's digit) or _classify strips (a byte-order mark). */
static int prefix_reads_plain(const char *buf, Py_ssize_t ls, Py_ssize_t ms, Py_ssize_t le) {
    char out[PREFIX_ROOM];
    Py_ssize_t n = 0;
    for (Py_ssize_t i = ls; i < ms;) {
        Py_ssize_t k = buf[i] == 0x1b ? ansi_len(buf, i, le) : 0;
        if (k) {
            if (i + k > ms) return 0; /* a code that would eat into the marker */
            i += k;
            continue;
        }
        if (n == PREFIX_ROOM) return 0;
        out[n++] = buf[i++];
    }
    Py_ssize_t j = 0;
    while (j < n && is_ws((unsigned char)out[j])) j++;
    if (j < n && (out[j] == '{' || (out[j] >= '0' && out[j] <= '9') || (unsigned char)out[j] >= 0x80)) return 0;
    return n < 6 || memmem(out, n, "CVDIAG", 6) == NULL;
}

/* Whether a wrapped line, head h, JSON ending at src[le_json], is certainly the envelope its
 * head shows, whatever the pass does with it: plain layout, no integer JSON may read as a
 * float, a ts in the emitter's shape. 1 yes, 0 no, -1 error. */
static int wrapped_certain(Folder *f, const char *src, const Head *h, Py_ssize_t le_json) {
    int64_t secs; int ms;
    if (h->long_int || !emitter_ts(f, src + h->a[ROLE_TS], h->n[ROLE_TS], &secs, &ms)) return 0;
    return plain_shaped(f, src, h, le_json);
}

/* The text of the Docker json-file record buf[ls:le] (its "log" string, unescaped) in
 * f->scratch: its length, 0 when the line is no complete record in Docker's own layout
 * that this reads exactly as orjson would (ASCII, no escape of a code past 0x7f), -1 on
 * error. */
static Py_ssize_t docker_text(Folder *f, const char *buf, Py_ssize_t ls, Py_ssize_t le) {
    static const char head[] = "{\"log\":\"", stream[] = "\",\"stream\":\"", timek[] = "\",\"time\":\"";
    if (le - ls < 8 || memcmp(buf + ls, head, 8) != 0 || le - ls > f->max_line) return 0;
    if (f->scratch_cap < le - ls) {
        char *grown = PyMem_Realloc(f->scratch, le - ls);
        if (!grown) { PyErr_NoMemory(); return -1; }
        f->scratch = grown; f->scratch_cap = le - ls;
    }
    char *out = f->scratch;
    Py_ssize_t n = 0, i = ls + 8;
    while (i < le) {
#ifdef CVDIAG_SSE2
        /* plain ASCII text 16 bytes at a time, up to the next quote, backslash, control byte or
         * byte past 0x7f (out has room: it is as long as the record, and n stays below i - ls) */
        const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
        while (i + 16 <= le) {
            __m128i v = _mm_loadu_si128((const __m128i *)(buf + i));
            /* a signed compare: bytes past 0x7f are negative, so below 0x20 with the controls */
            __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                                        _mm_cmplt_epi8(v, space));
            unsigned m = (unsigned)_mm_movemask_epi8(stop);
            _mm_storeu_si128((__m128i *)(out + n), v); /* all 16 copied, the bytes before a stop kept */
            if (m) {
                unsigned k = (unsigned)__builtin_ctz(m);
                n += k; i += k;
                break;
            }
            n += 16; i += 16;
        }
        if (i >= le) break;
#endif
        unsigned char c = (unsigned char)buf[i];
        if (c == '"') break;
        if (c < 0x20 || c >= 0x80) return 0;
        if (c != '\\') { out[n++] = (char)c; i++; continue; }
        if (i + 1 >= le) return 0;
        switch (buf[i + 1]) {
        case '"': case '\\': case '/': out[n++] = buf[i + 1]; break;
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'u': {
            unsigned v = 0;
            for (int k = 2; k < 6; k++) {
                char d = i + k < le ? buf[i + k] : 0;
                v = v * 16 + (d >= '0' && d <= '9' ? (unsigned)(d - '0') : d >= 'a' && d <= 'f' ? (unsigned)(d - 'a' + 10)
                              : d >= 'A' && d <= 'F' ? (unsigned)(d - 'A' + 10) : 0x10000);
            }
            if (v >= 0x80) return 0;
            out[n++] = (char)v;
            i += 6;
            continue;
        }
        default: return 0;
        }
        i += 2;
    }
    if (i >= le || n == 0 || out[n - 1] != '\n') return 0; /* no end, or a partial record: rejoin's */
    Py_ssize_t j = i;
    if (!starts(buf, j, le, stream, sizeof stream - 1)) return 0;
    j += sizeof stream - 1;
    if (!starts(buf, j, le, "stdout", 6) && !starts(buf, j, le, "stderr", 6)) return 0;
    j += 6;
    if (!starts(buf, j, le, timek, sizeof timek - 1)) return 0;
    for (j += sizeof timek - 1; j < le && buf[j] != '"'; j++)
        if ((unsigned char)buf[j] < 0x20 || (unsigned char)buf[j] >= 0x80 || buf[j] == '\\') return 0;
    if (!starts(buf, j, le, "\"}", 2)) return 0;
    for (j += 2; j < le; j++)
        if (!is_ws((unsigned char)buf[j])) return 0;
    return n;
}

/* -- the pass over one buffer ------------------------------------------------------- */
typedef struct {
    const char *buf;
    Py_ssize_t len, start;
    long long block;
    PyObject *line_cb, *body_cb, *slim_ok, *malformed_cb, *evidences; /* slim_ok: None, or any object */
} Pass;

/* Python reads the line buf[ls:le] (fold.Fold._line, or count's line). */
static int line_to_python(Pass *p, Py_ssize_t ls, Py_ssize_t le) {
    PyObject *r = PyObject_CallFunction(p->line_cb, "nn", ls, le);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

/* Whether the body of a canonical line of boundary ``b`` can be read from its metadata
 * alone: the plain layout (all edge headers null, so nothing beyond the head and the
 * metadata), an emitter ts, integers JSON reads as integers (a report's LLM time is the
 * head's duration_ms). ``proven``: the layout already is (wrapped_certain), not read
 * again. 1 yes, 0 no, -1 error. */
static int metadata_only(Folder *f, Pass *p, const char *src, const Head *h, const Name *b, const TsFacts *tf,
                         Py_ssize_t le_json, int proven) {
    if (p->slim_ok == Py_None || !tf->canonical_ok || h->long_int || b->accounting) return 0;
    return proven ? 1 : plain_shaped(f, src, h, le_json);
}

/* A report's LLM answer's duration (ms) added to its test's time, as fold.finite_ms lets it:
 * finite, and under 1e15 (junk past it). */
static void add_llm_ms(Slot *s, double d) {
    if (isfinite(d) && fabs(d) < 1e15) {
        s->llm_ms += d;
        s->llm_set = 1;
    }
}

/* The slot's evidence folds what the metadata object at src[md:md_end] says, the head
 * being folded here: Evidence.add_metadata(boundary, key, outcome, metadata, duration_ms)
 * called on evidences[slot] (``evidences``, the pass's list), the JSON read by ``loads``
 * where it is (a Docker record's text is no slice of the pass's buffer). A report's LLM
 * answer's duration is added up too (add_llm_ms). */
static int fold_metadata(Folder *f, Pass *p, const char *src, const Head *h, const Name *b, const TsFacts *tf,
                         Py_ssize_t slot, Py_ssize_t le_json) {
    PyObject *key = tf->has_key ? key_object(tf->key) : Py_NewRef(Py_None); /* as order_key says: None */
    PyObject *outcome = key ? PyUnicode_DecodeUTF8(src + h->a[ROLE_OUTCOME], h->n[ROLE_OUTCOME], "replace") : NULL;
    PyObject *duration = NULL;
    if (outcome) {
        if (h->num_n == 0) duration = Py_NewRef(Py_None);
        else {
            char digits_[24];
            memcpy(digits_, src + h->num_a, h->num_n); digits_[h->num_n] = 0; /* at most 19 bytes: no long_int */
            duration = PyLong_FromString(digits_, NULL, 10);
        }
    }
    if (!duration) { Py_XDECREF(key); Py_XDECREF(outcome); return -1; }
    Py_ssize_t md = h->end + f->middle_len, md_n = le_json - f->end_len - md;
    PyObject *ev = PyList_Check(p->evidences) ? PyList_GetItem(p->evidences, slot) : NULL; /* borrowed */
    PyObject *obj = ev ? load_metadata(f, src, md, md + md_n) : NULL;
    PyObject *r = NULL;
    if (obj) {
        PyObject *call[] = {ev, b->str, key, outcome, obj, duration};
        r = PyObject_VectorcallMethod(f->k_add_metadata, call, 6 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    }
    if (!ev && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "evidences is the pass's list of the slots' evidence");
    if (r && f->keep_lines && b->llm_response && duration != Py_None) { /* an integer, from at most 19 digits */
        double d = PyLong_AsDouble(duration);
        if (d == -1.0 && PyErr_Occurred()) Py_CLEAR(r);
        else add_llm_ms(SLOT(f, slot), d); /* Python ran: the slot's address is looked up again */
    }
    Py_XDECREF(obj); Py_DECREF(key); Py_DECREF(outcome); Py_DECREF(duration);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

/* One line in the emitter's layout: its head h and JSON at src[pos_json:le_json], the line
 * buf[ls:le] of the pass (src is buf, or a Docker record's text); ms is where its marker
 * is, for the messages. ``wrapped``: read here only where that is certain
 * (wrapped_certain), else handed to Python. 0, or -1 on error. */
static int fold_line(Folder *f, Pass *p, const char *src, Head *h, Py_ssize_t ms, Py_ssize_t pos_json,
                     Py_ssize_t le_json, Py_ssize_t ls, Py_ssize_t le, int wrapped) {
    PyObject *r;
    if (f->pair != NULL) { /* count mode: count_line counts only what wrapped_certain would take */
        /* scan.hits reads a line with colour codes unwrapped: codes before the marker too */
        if (!wrapped && ms > ls && memchr(src + ls, 0x1b, ms - ls) && !prefix_reads_plain(src, ls, ms, le))
            return line_to_python(p, ls, le);
        int counted = count_line(f, src, h, le_json);
        if (counted < 0) return -1;
        return counted ? 0 : line_to_python(p, ls, le);
    }
    if (wrapped) {
        int certain = wrapped_certain(f, src, h, le_json);
        if (certain <= 0) return certain < 0 ? -1 : line_to_python(p, ls, le);
    }
    Py_ssize_t slot = slot_of(f, src + h->a[ROLE_TEST_ID], h->n[ROLE_TEST_ID], NULL);
    if (slot == -3) return -1;
    if (slot < 0) return 0;
    Slot *s = SLOT(f, slot);
    if (!s->ev && !f->fold_aggs) return 0;
    const char *layer = src + h->a[ROLE_LAYER], *bnd = src + h->a[ROLE_BOUNDARY], *slug = src + h->a[ROLE_SLUG], *ts = src + h->a[ROLE_TS];
    const char *outcome = src + h->a[ROLE_OUTCOME];
    Name *b = name_of(f, bnd, h->n[ROLE_BOUNDARY]);
    if (!b) return -1;
    if (wrapped && !s->ev && f->keep_lines && b->llm_response)
        return line_to_python(p, ls, le); /* a deferred test's LLM time: read from the whole body */
    TsFacts tf = {0}; TsRef ref;
    if (ts_facts_of(f, ts, h->n[ROLE_TS], mono_offset_of_digits(src + h->a[ROLE_MONO], h->n[ROLE_MONO]), &tf) < 0) return -1;
    if (head_ts_ref(ts, h->n[ROLE_TS], &tf, &ref) < 0) return -1;
    int bad_ts = !tf.canonical_ok;
    int plain = 0;
    if (s->ev && (plain = wrapped ? b->plain : plain_line(f, src, h, b, le_json)) < 0) goto fail_ref;
    int failed = outcome_failed(f, outcome, h->n[ROLE_OUTCOME]);
    PyObject *env = NULL;
    int slim = 0;
    /* a head-only boundary not in the plain layout was proven so just now: not again */
    if (s->ev && !plain && !b->plain && (slim = metadata_only(f, p, src, h, b, &tf, le_json, wrapped)) < 0) goto fail_ref;
    if (wrapped && s->ev && !plain && !slim) { /* a body beyond the metadata: the general parser's */
        if (ref.kind == 2) Py_DECREF(ref.obj);
        return line_to_python(p, ls, le);
    }
    if (slim) {
        if (fold_metadata(f, p, src, h, b, &tf, slot, le_json) < 0) goto fail_ref;
        s = SLOT(f, slot); /* Python ran */
    } else if (s->ev && !plain) {
        /* the body: Python parses and folds it; it says no for a broken line */
        PyObject *key = tf.has_key ? key_object(tf.key) : Py_NewRef(Py_None);
        if (!key) goto fail_ref;
        r = PyObject_CallFunction(p->body_cb, "nnnnNii", slot, ms, pos_json, le_json, key, bad_ts && f->fold_aggs, 0);
        if (!r) goto fail_ref;
        if (r == Py_None) { Py_DECREF(r); goto done; }
        env = r;
        s = SLOT(f, slot); /* Python ran (slots stay where they are: chunks) */
    } else if (bad_ts && f->fold_aggs) {
        r = PyObject_CallFunction(p->malformed_cb, "n", ms);
        if (!r) goto fail_ref;
        Py_DECREF(r);
        goto done;
    }
    if (f->fold_aggs) {
        if (agg_fold(f, s, tf.canonical, layer, h->n[ROLE_LAYER], b, slug, h->n[ROLE_SLUG], failed) < 0) goto fail_env;
        if (f->keep_lines) {
            if (keep_place(f, s, p->block, ls, le) < 0) goto fail_env;
            if (!s->ev && b->llm_response) { /* a deferred test's LLM time, for the report */
                r = PyObject_CallFunction(p->body_cb, "nnnnOii", slot, ms, pos_json, le_json, Py_None, 0, 1);
                if (!r) goto fail_env;
                Py_DECREF(r);
                s = SLOT(f, slot);
            }
        }
    }
    if (env != NULL) { /* the parsed envelope's own head, as Evidence.add reads it */
        int rc = ev_head_env(f, SLOT(f, slot), env);
        Py_DECREF(env);
        if (rc < 0) goto fail_ref;
    } else if (s->ev) {
        int known;
        int lc = layer_class_of(layer, h->n[ROLE_LAYER], &known);
        if (!known) lc = b->layer_class;
        if (ev_head(s, b, lc, failed, tf.has_key, tf.key, &ref) < 0) goto fail_ref;
    }
done:
    if (ref.kind == 2) Py_DECREF(ref.obj);
    return 0;
fail_env:
    Py_XDECREF(env);
fail_ref:
    if (ref.kind == 2) Py_DECREF(ref.obj);
    return -1;
}

/* A Docker json-file record of the pass, buf[ls:le], read in C where certain: 1 done (or
 * handed to Python), 0 not such a record (Python's), -1 on error. Fold mode only: count
 * mode reads lines as scan.hits does, which skips the records a split line took. */
static int fold_docker(Folder *f, Pass *p, Py_ssize_t ls, Py_ssize_t le) {
    if (f->pair != NULL) return 0;
    Py_ssize_t n = docker_text(f, p->buf, ls, le);
    if (n <= 0) return (int)n;
    const char *q = f->scratch;
    Py_ssize_t pos = find(q, 0, n, f->head, f->head_len);
    Py_ssize_t ms = pos < 0 ? -1 : marker_before(f, q, pos);
    if (ms < 0) return 0; /* no head, bare JSON or another prefix: the general parser's */
    Head h;
    if (!match_head(f, q, pos, n, &h)) return 0;
    Py_ssize_t le_json = unwrapped_end(f, q, pos, n);
    if (le_json < 0 || !prefix_reads_plain(q, 0, ms, n)) return 0;
    return fold_line(f, p, q, &h, ls, pos, le_json, ls, le, 1) < 0 ? -1 : 1;
}

/* The marked lines of buf[lo:hi] between two canonical lines, as fold.gap_lines finds
 * them: a Docker record here, every other one to Python. 0, or -1 on error. */
static int fold_gap(Folder *f, Pass *p, Py_ssize_t lo, Py_ssize_t hi) {
    const char *buf = p->buf;
    Py_ssize_t cv = find(buf, lo, hi, f->markers[0], f->marker_lens[0]);
    Py_ssize_t sv = find(buf, lo, hi, f->markers[1], f->marker_lens[1]);
    while (cv >= 0 || sv >= 0) {
        Py_ssize_t at = cv < 0 || (sv >= 0 && sv < cv) ? sv : cv;
        Py_ssize_t ls = rfind_nl(buf, lo, at) + 1;
        Py_ssize_t le = find_nl(buf, at, p->len);
        if (le < 0) le = p->len;
        if (le > hi) return 0; /* the line of the next canonical match: read there */
        int done = buf[ls] == '{' ? fold_docker(f, p, ls, le) : 0;
        if (done < 0 || (!done && line_to_python(p, ls, le) < 0)) return -1;
        if (cv >= 0 && cv <= le) cv = find(buf, le + 1, hi, f->markers[0], f->marker_lens[0]);
        if (sv >= 0 && sv <= le) sv = find(buf, le + 1, hi, f->markers[1], f->marker_lens[1]);
    }
    return 0;
}

static PyObject *Folder_buffer(Folder *f, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end;
    Pass p;
    if (!PyArg_ParseTuple(args, "y*nnLOOOOO", &view, &start, &end, &p.block, &p.line_cb, &p.body_cb, &p.slim_ok,
                          &p.malformed_cb, &p.evidences))
        return NULL;
    if (f->loads == NULL || f->k_finish == NULL || f->n_taken) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_RuntimeError,
                        f->n_taken ? "this folder's tests were taken" : "this folder is not set up, or was cleared");
        return NULL;
    }
    const char *buf = p.buf = view.buf;
    p.len = view.len;
    if (end > view.len) end = view.len;
    if (start < 0) start = 0;
    p.start = start;
    Py_ssize_t gap = start;
    Py_ssize_t cv = find(buf, start, end, f->markers[0], f->marker_lens[0]);
    Py_ssize_t sv = find(buf, start, end, f->markers[1], f->marker_lens[1]);
    Py_ssize_t pos = find(buf, start, end, f->head, f->head_len);
    Head h;
    while (pos >= 0) {
        Py_ssize_t le = find_nl(buf, pos, end);
        if (le < 0) le = end;
        Py_ssize_t nxt = find(buf, le, end, f->head, f->head_len);
        Py_ssize_t ms = marker_before(f, buf, pos);
        int marked = ms >= 0; /* after CVDIAG or CVDIAG_EVENT, not a bare line */
        if (!marked && (pos == 0 || buf[pos - 1] == '\n'))
            ms = pos ? pos - 1 : 0;
        else if (!marked) { pos = nxt; continue; }
        if (!match_head(f, buf, pos, le, &h) || ms < gap) { pos = nxt; continue; }
        Py_ssize_t ls = buf[ms] == '\n' ? ms + 1 : rfind_nl(buf, start, ms) + 1;
        /* another marker before this one (anywhere in a bare line): the general parser's rule
         * for a line with several markers (its first one decides), as fold.Fold.buffer */
        Py_ssize_t lo = marked ? ls : pos, hi = marked ? ms : le;
        int several = cv >= 0 && cv < hi && (cv >= lo || find(buf, lo, hi, f->markers[0], f->marker_lens[0]) >= 0);
        if (((cv >= 0 && cv < ms) || (sv >= 0 && sv < ms)) && fold_gap(f, &p, gap, ms) < 0) goto fail;
        gap = le;
        if (cv < le) cv = cv >= 0 ? find(buf, le, end, f->markers[0], f->marker_lens[0]) : -1;
        if (sv < le) sv = sv >= 0 ? find(buf, le, end, f->markers[1], f->marker_lens[1]) : -1;
        Py_ssize_t pos_json = pos, le_json = le;
        pos = nxt;
        if (several) {
            if (line_to_python(&p, ls, le) < 0) goto fail;
            continue;
        }
        int wrapped = 0;
        if (!tail_ok(f, buf, le)) {
            /* colour codes or white space after the tail, behind a prefix: maybe certain */
            le_json = marked && le - ls <= f->max_line ? unwrapped_end(f, buf, pos_json, le) : -1;
            if (le_json < 0 || !prefix_reads_plain(buf, ls, ms, le)) {
                if (line_to_python(&p, ls, le) < 0) goto fail;
                continue;
            }
            wrapped = 1;
        }
        if (fold_line(f, &p, buf, &h, ms, pos_json, le_json, ls, le, wrapped) < 0) goto fail;
    }
    if (gap < end && (cv >= 0 || sv >= 0) && fold_gap(f, &p, gap, end) < 0) goto fail;
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&view);
    return NULL;
}

/* -- an envelope Python parsed (fold.Fold._line) ------------------------------------ */
/* fold_env(env, block, ls, le) -> the test's slot (folded; Python adds the body when the
 * slot has evidence), -1 (not this pass's), -2 (the ts is not a time: a malformed line). */
static PyObject *Folder_fold_env(Folder *f, PyObject *args) {
    PyObject *env;
    long long block;
    Py_ssize_t ls, le;
    if (!PyArg_ParseTuple(args, "O!Lnn", &PyDict_Type, &env, &block, &ls, &le)) return NULL;
    if (f->loads == NULL || f->k_finish == NULL || f->n_taken) {
        PyErr_SetString(PyExc_RuntimeError, f->n_taken ? "this folder's tests were taken" : "this folder is not set up");
        return NULL;
    }
    const char *tid, *layer = "", *bnd, *slug = "", *outcome = "", *ts;
    Py_ssize_t tid_n, layer_n = 0, bnd_n, slug_n = 0, outcome_n = 0, ts_n;
    PyObject *tid_o = PyDict_GetItemWithError(env, f->k_test_id);
    PyObject *bnd_o = tid_o ? PyDict_GetItemWithError(env, f->k_boundary) : NULL;
    PyObject *ts_o = bnd_o ? PyDict_GetItemWithError(env, f->k_ts) : NULL;
    if (!ts_o || !utf8_of(tid_o, &tid, &tid_n) || !utf8_of(bnd_o, &bnd, &bnd_n) || !utf8_of(ts_o, &ts, &ts_n)) {
        if (PyErr_Occurred()) return NULL;
        return PyLong_FromLong(-2); /* fields every checked envelope has as strings: cannot be */
    }
    PyObject *layer_o = PyDict_GetItemWithError(env, f->k_layer);
    PyObject *slug_o = PyDict_GetItemWithError(env, f->k_slug);
    PyObject *outcome_o = PyDict_GetItemWithError(env, f->k_outcome);
    if (PyErr_Occurred()) return NULL;
    if (layer_o) utf8_of(layer_o, &layer, &layer_n);
    if (slug_o) utf8_of(slug_o, &slug, &slug_n);
    if (outcome_o) utf8_of(outcome_o, &outcome, &outcome_n);
    Py_ssize_t slot = slot_of(f, tid, tid_n, NULL);
    if (slot == -3) return NULL;
    if (slot < 0 || (!SLOT(f, slot)->ev && !f->fold_aggs)) return PyLong_FromLong(-1);
    if (f->fold_aggs) {
        TsFacts tf = {0};
        Name *b = name_of(f, bnd, bnd_n);
        if (!b || ts_facts_of(f, ts, ts_n, 0, &tf) < 0) return NULL;
        if (!tf.canonical_ok) return PyLong_FromLong(-2);
        Slot *s = SLOT(f, slot);
        if (agg_fold(f, s, tf.canonical, layer, layer_n, b, slug, slug_n, outcome_failed(f, outcome, outcome_n)) < 0)
            return NULL;
        if (f->keep_lines && keep_place(f, s, block, ls, le) < 0) return NULL;
    }
    if (!SLOT(f, slot)->ev) return PyLong_FromSsize_t(slot); /* folded into the row only */
    if (ev_head_env(f, SLOT(f, slot), env) < 0) return NULL;
    return PyLong_FromSsize_t(slot);
}

/* -- results ------------------------------------------------------------------------ */
/* Whether p[*i:b] starts with JSON that orjson writes back byte for byte once read
 * (orjson.dumps(orjson.loads(x)) == x): no white space, ASCII strings with only the
 * escapes orjson writes the same (\" \\ \b \f \n \r \t), integers of at most 18 digits
 * other than -0, no fraction or exponent (orjson rewrites those), no key twice in an
 * object. 1 with *i past it, 0 otherwise: then read and write it. */
#define CANON_KEYS 32
static int canonical_value(const char *p, Py_ssize_t *i, Py_ssize_t b, int depth);


static int canonical_object(const char *p, Py_ssize_t *i, Py_ssize_t b, int depth) {
    Py_ssize_t key_at[CANON_KEYS], key_len[CANON_KEYS];
    int keys = 0;
    (*i)++;
    if (*i < b && p[*i] == '}') { (*i)++; return 1; }
    for (;;) {
        Py_ssize_t k = *i;
        if (k >= b || p[k] != '"' || !ascii_string(p, i, b, 1) || keys == CANON_KEYS) return 0;
        for (int n = 0; n < keys; n++)
            if (key_len[n] == *i - k && memcmp(p + key_at[n], p + k, *i - k) == 0) return 0; /* a key twice */
        key_at[keys] = k; key_len[keys++] = *i - k;
        if (*i >= b || p[*i] != ':') return 0;
        (*i)++;
        if (!canonical_value(p, i, b, depth + 1) || *i >= b) return 0;
        if (p[*i] == '}') { (*i)++; return 1; }
        if (p[*i] != ',') return 0;
        (*i)++;
    }
}

static int canonical_value(const char *p, Py_ssize_t *i, Py_ssize_t b, int depth) {
    if (*i >= b || depth > 64) return 0;
    char c = p[*i];
    if (c == '{') return canonical_object(p, i, b, depth);
    if (c == '[') {
        (*i)++;
        if (*i < b && p[*i] == ']') { (*i)++; return 1; }
        for (;;) {
            if (!canonical_value(p, i, b, depth + 1) || *i >= b) return 0;
            if (p[*i] == ']') { (*i)++; return 1; }
            if (p[*i] != ',') return 0;
            (*i)++;
        }
    }
    if (c == '"') return ascii_string(p, i, b, 1);
    if (c == '-' || (c >= '0' && c <= '9')) {
        Py_ssize_t j = *i + (c == '-'), d0 = j;
        if (j < b && p[j] == '0') j++;
        else while (j < b && p[j] >= '0' && p[j] <= '9') j++;
        if (j == d0 || j - d0 > 18 || (c == '-' && j - d0 == 1 && p[d0] == '0')) return 0;
        if (j < b && (p[j] == '.' || p[j] == 'e' || p[j] == 'E')) return 0;
        *i = j;
        return 1;
    }
    if (starts(p, *i, b, "true", 4)) { *i += 4; return 1; }
    if (starts(p, *i, b, "false", 5)) { *i += 5; return 1; }
    if (starts(p, *i, b, "null", 4)) { *i += 4; return 1; }
    return 0;
}

/* Whether buf[a:b] is one JSON object orjson writes back as it is (canonical_value). */
static int canonical_json_object(const char *buf, Py_ssize_t a, Py_ssize_t b) {
    Py_ssize_t i = a;
    return a < b && buf[a] == '{' && canonical_object(buf, &i, b, 0) && i == b;
}

/* -- a report's event of a line in the emitter's plain layout (report_data._encode) --- */
typedef struct {
    char *b;
    Py_ssize_t n, cap;
} Out;

static int out_put(Out *o, const char *p, Py_ssize_t n) {
    if (o->n + n > o->cap) {
        Py_ssize_t cap = (o->n + n) * 2 + 256;
        char *grown = PyMem_Realloc(o->b, cap);
        if (!grown) { PyErr_NoMemory(); return -1; }
        o->b = grown; o->cap = cap;
    }
    memcpy(o->b + o->n, p, n);
    o->n += n;
    return 0;
}

static int out_int(Out *o, long long v) {
    char d[24];
    int i = 24;
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do { d[--i] = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0) d[--i] = '-';
    return out_put(o, d + i, 24 - i);
}

/* An integer's JSON text as Python writes the int it reads as: "-0" is 0. */
static int out_json_int(Out *o, const char *p, Py_ssize_t n) {
    if (n == 2 && p[0] == '-' && p[1] == '0') return out_put(o, "0", 1);
    return out_put(o, p, n);
}

static int out_u64_be(Out *o, uint64_t v) {
    char b[8];
    for (int k = 7; k >= 0; k--) { b[k] = (char)(v & 0xff); v >>= 8; }
    return out_put(o, b, 8);
}

/* ``strings`` told that an event numbered a name past the seed (its events_past_seed):
 * until then, every event numbered in it is numbered alike in every table. */
static int past_seed(Folder *f, PyObject *strings) { return PyObject_SetAttr(strings, f->k_past_seed, Py_True); }

/* The number ``strings`` gives the name p[:n] (ASCII): remembered per name for the
 * table it came from (a table never renumbers a name), else looked up in it (a dict),
 * else asked of it (called: a name it has not met). */
static int out_name(Folder *f, Out *o, const char *p, Py_ssize_t n, PyObject *strings) {
    NumberedName *c = &f->numbered[fnv(p, n) % N_NUMBERED];
    if (c->index == strings && c->len == n && memcmp(c->bytes, p, n) == 0)
        return c->number >= f->event_seed && past_seed(f, strings) < 0 ? -1 : out_int(o, c->number);
    PyObject *name = PyUnicode_DecodeASCII(p, n, NULL);
    if (!name) return -1;
    PyObject *got = PyDict_GetItemWithError(strings, name);
    if (got) Py_INCREF(got);
    else if (!PyErr_Occurred()) got = PyObject_CallOneArg(strings, name);
    Py_DECREF(name);
    if (!got) return -1;
    long long v = PyLong_AsLongLong(got);
    Py_DECREF(got);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (n <= (Py_ssize_t)sizeof c->bytes) {
        Py_INCREF(strings);
        Py_XSETREF(c->index, strings);
        memcpy(c->bytes, p, n); c->len = n; c->number = v;
    }
    return v >= f->event_seed && past_seed(f, strings) < 0 ? -1 : out_int(o, v);
}

/* What each head field is to the event's "rest" (report_data._UNSAID): */
enum { R_REBUILT = 'r', R_KEEP = 'k', R_NOT_NULL = 'n', R_NOT_TEST_ID = 't', R_NOT_SLUG = 's', R_SPAN = 'i' };

/* Where the general parser reads the envelope of the line buf[ls:le], when it certainly
 * reads it there: 1 with *src (buf, or a Docker record's text in f->scratch) and the JSON
 * at src[*pos:*end]; 0 when not certain; -1 on error. The cases of parsing.parse_line
 * taken here: the first "CVDIAG {" of a line that has no colour code, does not start
 * with "{" and holds no marker before it; a line that starts with "CVDIAG_EVENT {" and holds no "CVDIAG {"; a Docker
 * json-file record whose text is one of those two, starting at its first byte; a line
 * that is a bare envelope, with no colour code and no marker anywhere in it. */
static int event_json(Folder *f, const char *buf, Py_ssize_t ls, Py_ssize_t le, const char **src, Py_ssize_t *pos,
                      Py_ssize_t *end) {
    static const char json_prefix[] = "CVDIAG {";
    const Py_ssize_t jn = sizeof json_prefix - 1;
    if (le - ls > f->max_line || ls >= le) return 0;
    if (buf[ls] == '{') { /* a Docker record of the emitter's own line, or a bare envelope */
        if (starts(buf, ls, le, f->head, f->head_len)) { /* read whole when no marker is in it */
            if (memchr(buf + ls, 0x1b, le - ls) || find(buf, ls, le, f->markers[0], f->marker_lens[0]) >= 0) return 0;
            *src = buf; *pos = ls; *end = le;
            return 1;
        }
        Py_ssize_t n = docker_text(f, buf, ls, le);
        if (n <= 0) return (int)n;
        const char *q = f->scratch;
        n--; /* its newline */
        if (memchr(q, 0x1b, n)) return 0;
        Py_ssize_t at = starts(q, 0, n, json_prefix, jn) ? jn - 1 : -1;
        if (at < 0 && starts(q, 0, n, f->jprefix, f->jprefix_len) && f->jprefix_len < n && q[f->jprefix_len] == '{')
            at = f->jprefix_len;
        if (at < 0) return 0;
        *src = q; *pos = at; *end = n;
        return 1;
    }
    if (memchr(buf + ls, 0x1b, le - ls)) return 0;
    Py_ssize_t first = find(buf, ls, le, json_prefix, jn);
    *src = buf; *end = le;
    if (first >= 0) { /* the line's first marker: of several, the first decides */
        if (find(buf, ls, first, f->markers[0], f->marker_lens[0]) >= 0) return 0;
        *pos = first + jn - 1;
        return 1;
    }
    if (starts(buf, ls, le, f->jprefix, f->jprefix_len) && ls + f->jprefix_len < le && buf[ls + f->jprefix_len] == '{') {
        *pos = ls + f->jprefix_len;
        return 1;
    }
    return 0;
}

/* set_event_format(rules, dumps, seed): how ``event`` writes a report's events, set once
 * per reader. ``rules`` holds one byte per head field (the R_ codes), one of them R_SPAN;
 * ``dumps`` writes metadata as the row's would be; the first ``seed`` names of every
 * table are numbered alike (a table told otherwise: past_seed). */
static PyObject *Folder_set_event_format(Folder *f, PyObject *args) {
    const char *rules;
    Py_ssize_t n, seed;
    PyObject *dumps;
    if (!PyArg_ParseTuple(args, "y#On", &rules, &n, &dumps, &seed)) return NULL;
    if (f->in_event) { /* the event being written reads both */
        PyErr_SetString(PyExc_RuntimeError, "set_event_format while an event is written");
        return NULL;
    }
    int span = -1;
    for (Py_ssize_t k = 0; k < n; k++)
        if (rules[k] == R_SPAN) span = (int)k;
    if (n != f->n_fields || span < 0) {
        PyErr_SetString(PyExc_ValueError, "one rule per head field, one of them the span's");
        return NULL;
    }
    char *copy = PyMem_Malloc(n);
    if (!copy) return PyErr_NoMemory();
    memcpy(copy, rules, n);
    PyMem_Free(f->event_rules);
    f->event_rules = copy;
    f->event_span = span;
    f->event_seed = seed;
    Py_INCREF(dumps);
    Py_XSETREF(f->event_dumps, dumps);
    Py_RETURN_NONE;
}

/* report_data._encode of the envelope on the line buf[ls:le] (buf of len bytes), when the
 * general parser certainly reads it as this head (event_json), in the plain layout, with an
 * emitter ts: its sort key then its row, written as set_event_format says. Names are
 * numbered by ``strings``: a dict, called for a name not in it yet, its events_past_seed
 * set True once an event names one past the seed; the metadata is read by ``loads``.
 * A new reference to the bytes, Py_None (the general parser's to read), or NULL. */
static PyObject *event_of(Folder *f, const char *buf, Py_ssize_t len, Py_ssize_t ls, Py_ssize_t le, long long t0_ms,
                          const char *slug, Py_ssize_t slug_n, PyObject *strings) {
    const char *rules = f->event_rules;
    PyObject *dumps = f->event_dumps;
    if (f->in_event) Py_RETURN_NONE; /* its scratch and room are in use: the general parser's */
    f->in_event = 1;
    PyObject *result = NULL, *md_json = NULL;
    Out o = {f->event_room, 0, f->event_room_cap};
    const char *src = NULL;
    Py_ssize_t pos = 0, end = 0;
    if (ls < 0 || le > len) goto none;
    int found = event_json(f, buf, ls, le, &src, &pos, &end);
    if (found < 0) goto fail;
    Head h;
    int64_t secs; int milli;
    if (!found || !match_head_spans(f, src, pos, end, &h, 1) || h.long_int || !plain_frame(f, src, &h, end) ||
        !emitter_ts(f, src + h.a[ROLE_TS], h.n[ROLE_TS], &secs, &milli))
        goto none;
    /* the metadata as dumps writes what loads reads: as it is when that is certain (most
     * lines), else read and written; not an object orjson reads: the general parser's */
    Py_ssize_t md_a = h.end + f->middle_len, md_b = end - f->end_len;
    if (!canonical_json_object(src, md_a, md_b)) {
        PyObject *md_obj = load_metadata(f, src, md_a, md_b);
        if (!md_obj || !PyDict_CheckExact(md_obj)) {
            Py_XDECREF(md_obj);
            PyErr_Clear();
            goto none;
        }
        md_json = PyObject_CallOneArg(dumps, md_obj);
        Py_DECREF(md_obj);
        if (!md_json) { /* metadata it cannot write: the general parser's, which says what becomes of it */
            if (!PyErr_ExceptionMatches(PyExc_ValueError) && !PyErr_ExceptionMatches(PyExc_TypeError) &&
                !PyErr_ExceptionMatches(PyExc_OverflowError) && !PyErr_ExceptionMatches(PyExc_RecursionError))
                goto fail;
            PyErr_Clear();
            goto none;
        }
        if (!PyBytes_Check(md_json)) { PyErr_SetString(PyExc_TypeError, "dumps gives bytes"); goto fail; }
    }
    /* the sort key (report_data._sort_key): order_key + 2**127 in 16 bytes, the span flag,
     * the identity's parts each ended by \0\1 (a head string holds no NUL), then \0\0 */
    int span = f->event_span;
    const char *sv = src + h.va[span];
    Py_ssize_t sn = h.ve[span] - h.va[span];
    int span_null = sn == 4 && memcmp(sv, "null", 4) == 0;
    if (out_u64_be(&o, (uint64_t)(secs * 1000000 + (int64_t)milli * 1000) + ((uint64_t)1 << 63)) < 0 ||
        out_u64_be(&o, mono_offset_of_digits(src + h.a[ROLE_MONO], h.n[ROLE_MONO])) < 0 || out_put(&o, span_null ? "\0" : "\1", 1) < 0 ||
        (!span_null && out_put(&o, sv + 1, sn - 2) < 0) || out_put(&o, "\0\1", 2) < 0 ||
        out_put(&o, src + h.a[ROLE_BOUNDARY], h.n[ROLE_BOUNDARY]) < 0 || out_put(&o, "\0\1", 2) < 0 || out_put(&o, src + h.a[ROLE_TS], h.n[ROLE_TS]) < 0 ||
        out_put(&o, "\0\1", 2) < 0 || out_json_int(&o, src + h.a[ROLE_MONO], h.n[ROLE_MONO]) < 0 || out_put(&o, "\0\1\0\0", 4) < 0)
        goto fail;
    /* the row: [offset, layer, boundary, outcome, duration_ms, metadata, rest] */
    if (out_put(&o, "[", 1) < 0 || out_int(&o, secs * 1000 + milli - t0_ms) < 0 || out_put(&o, ",", 1) < 0 ||
        out_name(f, &o, src + h.a[ROLE_LAYER], h.n[ROLE_LAYER], strings) < 0 || out_put(&o, ",", 1) < 0 ||
        out_name(f, &o, src + h.a[ROLE_BOUNDARY], h.n[ROLE_BOUNDARY], strings) < 0 || out_put(&o, ",", 1) < 0 ||
        out_name(f, &o, src + h.a[ROLE_OUTCOME], h.n[ROLE_OUTCOME], strings) < 0 || out_put(&o, ",", 1) < 0)
        goto fail;
    if ((h.num_n ? out_json_int(&o, src + h.num_a, h.num_n) : out_put(&o, "null", 4)) < 0 || out_put(&o, ",", 1) < 0 ||
        (md_json ? out_put(&o, PyBytes_AS_STRING(md_json), PyBytes_GET_SIZE(md_json))
                 : out_put(&o, src + md_a, md_b - md_a)) < 0 ||
        out_put(&o, ",", 1) < 0)
        goto fail;
    /* rest: the head fields the page cannot rebuild, in the line's order */
    int said = 0;
    for (int k = 0; k < f->n_fields; k++) {
        const char *v = src + h.va[k];
        Py_ssize_t n = h.ve[k] - h.va[k];
        int r = rules[k];
        if (r == R_REBUILT) continue;
        if (r == R_NOT_NULL && n == 4 && memcmp(v, "null", 4) == 0) continue;
        if (r == R_NOT_TEST_ID && n == h.n[ROLE_TEST_ID] + 2 && memcmp(v + 1, src + h.a[ROLE_TEST_ID], h.n[ROLE_TEST_ID]) == 0) continue;
        if (r == R_NOT_SLUG && n == slug_n + 2 && memcmp(v + 1, slug, slug_n) == 0) continue;
        Field *fd = &f->fields[k];
        if (out_put(&o, said ? "," : "{", 1) < 0 || out_put(&o, fd->name + 1, fd->name_len - 1) < 0) goto fail;
        int integer = fd->kind == K_CAPTURE_INT || (fd->kind == K_NULL_OR_INT && *v != 'n');
        if ((integer ? out_json_int(&o, v, n) : out_put(&o, v, n)) < 0) goto fail;
        said = 1;
    }
    if (out_put(&o, said ? "}]" : "0]", 2) < 0) goto fail;
    result = PyBytes_FromStringAndSize(o.b, o.n);
    goto done;
none:
    result = Py_NewRef(Py_None);
    goto done;
fail:
    result = NULL;
done:
    Py_XDECREF(md_json);
    f->event_room = o.b; f->event_room_cap = o.cap;
    f->in_event = 0;
    return result;
}

/* The reader is ready to write events: set_event_format was called, loads is kept. */
static int event_ready(Folder *f) {
    if (f->event_rules == NULL || f->loads == NULL || f->k_finish == NULL) {
        PyErr_SetString(PyExc_ValueError, "set_event_format first, on a folder not cleared");
        return 0;
    }
    return 1;
}

/* event(buf, ls, le, t0_ms, slug, strings) -> bytes, or None: event_of the line buf[ls:le]. */
static PyObject *Folder_event(Folder *f, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyBytes_Check(args[4]) || !PyDict_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "event(buf, ls, le, t0_ms, slug: bytes, strings: dict)");
        return NULL;
    }
    Py_ssize_t ls = PyLong_AsSsize_t(args[1]), le = PyLong_AsSsize_t(args[2]);
    long long t0_ms = PyLong_AsLongLong(args[3]);
    if (PyErr_Occurred() || !event_ready(f)) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = event_of(f, view.buf, view.len, ls, le, t0_ms, PyBytes_AS_STRING(args[4]),
                                PyBytes_GET_SIZE(args[4]), args[5]);
    PyBuffer_Release(&view);
    return result;
}

/* One line of events_at for its reader: its event appended to reader.events, or the line
 * handed to reader.general(buf, ls, le); then reader.left counted down, and finish() called
 * at 0. 0, or -1 with an exception set. */
static int event_for(Folder *f, PyObject *bufobj, const Py_buffer *view, Py_ssize_t ls, Py_ssize_t le, PyObject *reader) {
    PyObject *t0 = PyObject_GetAttr(reader, f->k_t0_ms), *slug = PyObject_GetAttr(reader, f->k_slug_utf8),
             *strings = PyObject_GetAttr(reader, f->k_strings), *event = NULL, *left = NULL;
    int rc = -1;
    if (!t0 || !slug || !strings) goto done;
    long long t0_ms = PyLong_AsLongLong(t0);
    if (t0_ms == -1 && PyErr_Occurred()) goto done;
    if (!PyBytes_Check(slug) || !PyDict_Check(strings)) {
        PyErr_SetString(PyExc_TypeError, "a reader's slug_utf8 is bytes, its strings a dict");
        goto done;
    }
    event = event_of(f, view->buf, view->len, ls, le, t0_ms, PyBytes_AS_STRING(slug), PyBytes_GET_SIZE(slug), strings);
    if (!event) goto done;
    if (event == Py_None) {
        Py_SETREF(event, PyObject_CallMethod(reader, "general", "Onn", bufobj, ls, le));
    } else {
        PyObject *events = PyObject_GetAttr(reader, f->k_events);
        int bad = !events || !PyList_Check(events) || PyList_Append(events, event) < 0;
        if (events && !PyList_Check(events)) PyErr_SetString(PyExc_TypeError, "a reader's events is a list");
        Py_XDECREF(events);
        if (bad) goto done;
    }
    if (!event || !(left = PyObject_GetAttr(reader, f->k_left))) goto done;
    Py_ssize_t n = PyLong_AsSsize_t(left);
    if (n == -1 && PyErr_Occurred()) goto done;
    Py_SETREF(left, PyLong_FromSsize_t(n - 1));
    if (!left || PyObject_SetAttr(reader, f->k_left, left) < 0) goto done;
    if (n == 1) { /* its last line: finished as soon as it can be */
        PyObject *r = PyObject_CallMethodNoArgs(reader, f->k_finish);
        if (!r) goto done;
        Py_DECREF(r);
    }
    rc = 0;
done:
    Py_XDECREF(t0); Py_XDECREF(slug); Py_XDECREF(strings); Py_XDECREF(event); Py_XDECREF(left);
    return rc;
}

/* events_at(buf, shift, lines): each line of ``lines`` ((start, end, reader), a list, at
 * buf[start - shift:end - shift]) to its reader (event_for), in order; the Python twin is
 * report_data._take_lines. */
static PyObject *Folder_events_at(Folder *f, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyList_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "events_at(buf, shift, lines: list)");
        return NULL;
    }
    Py_ssize_t shift = PyLong_AsSsize_t(args[1]);
    if ((shift == -1 && PyErr_Occurred()) || !event_ready(f)) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *lines = args[2];
    int rc = 0;
    for (Py_ssize_t k = 0; rc == 0 && k < PyList_GET_SIZE(lines); k++) {
        PyObject *line = PyList_GET_ITEM(lines, k);
        if (!PyTuple_Check(line) || PyTuple_GET_SIZE(line) != 3) {
            PyErr_SetString(PyExc_TypeError, "a line is (start, end, reader)");
            rc = -1;
            break;
        }
        Py_INCREF(line); /* a reader's callback may change the list */
        Py_ssize_t ls = PyLong_AsSsize_t(PyTuple_GET_ITEM(line, 0)), le = PyLong_AsSsize_t(PyTuple_GET_ITEM(line, 1));
        rc = PyErr_Occurred() ? -1 : event_for(f, args[0], &view, ls - shift, le - shift, PyTuple_GET_ITEM(line, 2));
        Py_DECREF(line);
    }
    PyBuffer_Release(&view);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

/* The results of take(), named: each field read by name on the Python side. Their names
 * are declared once, in contract.layout.RESULTS; cvdiag.read._compiled refuses a module
 * whose names are not those (RESULTS: these, as the module exposes them). */
static PyStructSequence_Field AGG_FIELDS[] = {{"events"}, {"first"}, {"last"}, {"failed"}, {"flags"},
                                              {"layers"}, {"slugs"}, {"order"}, {NULL}};
static PyStructSequence_Field KEPT_FIELDS[] = {{"places"}, {"more"}, {"llm_ms"}, {NULL}};
/* A head's layer counts (N_LAYER_CLASSES) and its three picks (key, ts, boundary) are fields
 * of their own: no structure nested in it, each a cost per test. */
static PyStructSequence_Field HEAD_FIELDS[] = {
    {"events"}, {"names"}, {"counts"}, {"other"}, {"aimock_events"}, {"backend_events"}, {"other_events"},
    {"probe_events"}, {"failures"}, {"first_key"}, {"first_ts"}, {"first_boundary"}, {"last_key"}, {"last_ts"},
    {"last_boundary"}, {"last_backend_key"}, {"last_backend_ts"}, {"last_backend_boundary"}, {"counters"},
    {"skipped"}, {NULL}};
static PyStructSequence_Field TAKEN_FIELDS[] = {{"agg"}, {"kept"}, {"head"}, {NULL}};
#define RESULT(name, fields) {"cvdiag.read._cfold." name, NULL, fields, (int)(sizeof(fields) / sizeof(fields[0])) - 1}
static PyStructSequence_Desc RESULT_DESCS[] = {
    RESULT("Agg", AGG_FIELDS), RESULT("Kept", KEPT_FIELDS), RESULT("Head", HEAD_FIELDS), RESULT("Taken", TAKEN_FIELDS),
};
enum { R_AGG, R_KEPT, R_HEAD, R_TAKEN, N_RESULTS };
static PyTypeObject *RESULT_TYPES[N_RESULTS];
/* The classes Python declares for the results (set_result_classes: each a class with a
 * __slots__ member per field, whose reads the interpreter specializes as a structure's
 * fields are not), and where each field sits in their instances. NULL: the types above. */
static PyTypeObject *RESULT_CLASSES[N_RESULTS];
static Py_ssize_t RESULT_OFFSETS[N_RESULTS][24];

/* One result of type r from its n values (each a new reference, NULL when it failed: then
 * the others are released and NULL returned). */
static PyObject *result(int r, PyObject **values) {
    int n = RESULT_DESCS[r].n_in_sequence, ok = 1;
    for (int i = 0; i < n; i++) ok &= values[i] != NULL;
    PyTypeObject *cls = RESULT_CLASSES[r];
    if (cls) { /* zeroed by its allocation; no Python runs before its fields are set */
        PyObject *out = ok ? cls->tp_alloc(cls, 0) : NULL;
        for (int i = 0; i < n; i++) {
            if (out) *(PyObject **)((char *)out + RESULT_OFFSETS[r][i]) = values[i];
            else Py_XDECREF(values[i]);
        }
        return out;
    }
    PyObject *out = ok ? PyStructSequence_New(RESULT_TYPES[r]) : NULL;
    for (int i = 0; i < n; i++) {
        if (out) PyStructSequence_SET_ITEM(out, i, values[i]);
        else Py_XDECREF(values[i]);
    }
    return out;
}

/* set_result_classes({name: class}): the results built as instances of these classes, each
 * with a __slots__ member for every field of its RESULTS entry (else a ValueError, and
 * nothing is changed). */
static PyObject *module_set_result_classes(PyObject *unused, PyObject *classes) {
    PyTypeObject *found[N_RESULTS];
    Py_ssize_t offsets[N_RESULTS][24];
    if (!PyDict_Check(classes)) { PyErr_SetString(PyExc_TypeError, "set_result_classes takes a dict"); return NULL; }
    for (int r = 0; r < N_RESULTS; r++) {
        const char *name = strrchr(RESULT_DESCS[r].name, '.') + 1;
        PyObject *cls = PyDict_GetItemString(classes, name);
        if (!cls || !PyType_Check(cls) || ((PyTypeObject *)cls)->tp_itemsize ||
            ((PyTypeObject *)cls)->tp_alloc != PyType_GenericAlloc || RESULT_DESCS[r].n_in_sequence > 24) {
            PyErr_Format(PyExc_ValueError, "no class of slots for the result %s", name);
            return NULL;
        }
        for (int i = 0; i < RESULT_DESCS[r].n_in_sequence; i++) {
            PyObject *d = PyDict_GetItemString(((PyTypeObject *)cls)->tp_dict, RESULT_DESCS[r].fields[i].name);
            if (!d || Py_TYPE(d) != &PyMemberDescr_Type || ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
                PyErr_Format(PyExc_ValueError, "the class of %s has no slot %s", name, RESULT_DESCS[r].fields[i].name);
                return NULL;
            }
            offsets[r][i] = ((PyMemberDescrObject *)d)->d_member->offset;
        }
        found[r] = (PyTypeObject *)cls;
    }
    for (int r = 0; r < N_RESULTS; r++) {
        Py_XSETREF(RESULT_CLASSES[r], (PyTypeObject *)Py_NewRef(found[r]));
        memcpy(RESULT_OFFSETS[r], offsets[r], sizeof(offsets[r]));
    }
    Py_RETURN_NONE;
}

static PyObject *ts_object(const TsRef *r) {
    if (r->kind == 1) return PyUnicode_DecodeASCII(r->b, 24, "strict");
    if (r->kind == 2) return Py_NewRef(r->obj);
    Py_RETURN_NONE;
}

/* A pick's three fields (key, ts, boundary) into v: new references, NULL where one failed. */
static void pick_fields(const PickRef *p, PyObject **v) {
    v[0] = p->set && p->has_key ? key_object(p->key) : Py_NewRef(Py_None);
    v[1] = p->set && p->has_key ? ts_object(&p->ts) : Py_NewRef(Py_None);
    v[2] = Py_NewRef(p->set ? p->boundary : Py_None);
}

static void slot_free(Slot *s);

/* A test's layers as a frozenset shared by every test that met the same ones in the same
 * order: a log's tests have a few sets between them, and a set of its own is 216 bytes. */
static PyObject *layer_set(Folder *f, Slot *s) {
    PyObject *key = PyTuple_New(s->n_layers);
    if (!key) return NULL;
    for (Py_ssize_t i = 0; i < s->n_layers; i++) PyTuple_SET_ITEM(key, i, Py_NewRef(s->layers[i]));
    PyObject *set = PyDict_GetItemWithError(f->layer_sets, key);
    if (set || PyErr_Occurred()) {
        Py_DECREF(key);
        return set ? Py_NewRef(set) : NULL;
    }
    set = PyFrozenSet_New(key);
    if (set && PyDict_GET_SIZE(f->layer_sets) < 4096 && PyDict_SetItem(f->layer_sets, key, set) < 0) Py_CLEAR(set);
    Py_DECREF(key);
    return set;
}

/* add_llm_ms(slot, ms): an LLM call's duration that Python read (the general parser's
 * lines) added to the slot's time, in file order with those added here. */
static PyObject *Folder_add_llm_ms(Folder *f, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "add_llm_ms(slot, ms)");
        return NULL;
    }
    Py_ssize_t k = PyLong_AsSsize_t(args[0]);
    double d = PyFloat_AsDouble(args[1]);
    if (PyErr_Occurred()) return NULL;
    if (k < 0 || k >= f->n_slots || !f->slots[k / SLOT_CHUNK]) {
        PyErr_SetString(PyExc_IndexError, "no such slot");
        return NULL;
    }
    add_llm_ms(SLOT(f, k), d);
    Py_RETURN_NONE;
}

/* take(slot) -> (agg, kept, head) of one test, its memory handed back: the results are
 * taken one test at a time, so a pass never holds them twice.
 * agg (events, first, last, failed, flags, layers (a frozenset, shared: layer_set), slugs, order) or None;
 * kept (places as keep_place packs them, more, the LLM time or None) or None;
 * head (events, names, counts, other, layers[4], failures, first, last, backend, counters, skipped) or None. */
static PyObject *Folder_take(Folder *f, PyObject *arg) {
    Py_ssize_t k = PyLong_AsSsize_t(arg);
    if (k == -1 && PyErr_Occurred()) return NULL;
    if (k < 0 || k >= f->n_slots || !f->slots[k / SLOT_CHUNK]) {
        PyErr_SetString(PyExc_IndexError, k < 0 || k >= f->n_slots ? "no such slot" : "slot already taken");
        return NULL;
    }
    Slot *s = SLOT(f, k);
    PyObject *agg = NULL, *kept = NULL, *head = NULL, *layers = NULL, *slugs = NULL;
    if (s->agg_on) {
        if (!(layers = layer_set(f, s)) || !(slugs = PyList_New(0))) goto fail;
        for (int i = 0; i < s->n_slugs; i++)
            if (PyList_Append(slugs, s->slugs[i]) < 0) goto fail;
        PyObject *a[] = {PyLong_FromLongLong(s->a_events), PyBytes_FromStringAndSize(s->first, 24),
                         PyBytes_FromStringAndSize(s->last, 24), PyLong_FromLong(s->failed), PyLong_FromLong(s->flags),
                         layers, slugs, PyLong_FromSsize_t(s->agg_order)};
        layers = slugs = NULL; /* the result has them, or they are gone with its failure */
        if (!(agg = result(R_AGG, a))) goto fail;
        if (f->keep_lines) {
            PyObject *kv[] = {PyBytes_FromStringAndSize(s->places ? (const char *)s->places : "", s->places_len),
                              PyLong_FromLongLong(s->more),
                              s->llm_set ? PyFloat_FromDouble(s->llm_ms) : Py_NewRef(Py_None)};
            if (!(kept = result(R_KEPT, kv))) goto fail;
        }
    }
    if (s->ev) {
        PyObject *names = PyTuple_New(s->n_bc), *counts = PyList_New(s->n_bc), *ctr = PyTuple_New(f->n_counters);
        if (!names || !counts || !ctr) { Py_XDECREF(names); Py_XDECREF(counts); Py_XDECREF(ctr); goto fail; }
        for (int i = 0; i < s->n_bc; i++) {
            PyTuple_SET_ITEM(names, i, Py_NewRef(s->bc[i].name));
            PyList_SET_ITEM(counts, i, PyLong_FromLongLong(s->bc[i].count));
        }
        for (int i = 0; i < f->n_counters; i++) PyTuple_SET_ITEM(ctr, i, PyLong_FromLongLong(s->counters[i]));
        PyObject *h[8 + 3 * 3 + 3], **v = h;
        *v++ = PyLong_FromLongLong(s->events), *v++ = names, *v++ = counts, *v++ = PyLong_FromLongLong(s->other_names);
        for (int i = 0; i < N_LAYER_CLASSES; i++) *v++ = PyLong_FromLongLong(s->lay[i]);
        *v++ = PyLong_FromLongLong(s->failures);
        pick_fields(&s->first_pick, v), pick_fields(&s->last_pick, v + 3), pick_fields(&s->backend_pick, v + 6);
        v += 9;
        *v++ = ctr, *v++ = PyLong_FromLongLong(s->skipped);
        if (!(head = result(R_HEAD, h))) goto fail;
    }
    PyObject *t[] = {agg ? agg : Py_NewRef(Py_None), kept ? kept : Py_NewRef(Py_None), head ? head : Py_NewRef(Py_None)};
    agg = kept = head = NULL; /* the result has them */
    PyObject *item = result(R_TAKEN, t);
    if (item) {
        int ev = s->ev;
        slot_free(s);
        memset(s, 0, sizeof(Slot));
        s->ev = ev; /* taken: nothing left to free */
        if (k == f->n_taken && (++f->n_taken % SLOT_CHUNK == 0 || f->n_taken == f->n_slots)) {
            Py_ssize_t c = (f->n_taken - 1) / SLOT_CHUNK; /* every slot of it taken */
            chunk_free(f->slots[c]);
            f->slots[c] = NULL;
        }
    }
    return item;
fail:
    Py_XDECREF(agg); Py_XDECREF(kept); Py_XDECREF(head); Py_XDECREF(layers); Py_XDECREF(slugs);
    return NULL;
}

/* -- making and unmaking ------------------------------------------------------------ */
static void slot_free(Slot *s) {
    for (Py_ssize_t i = 0; i < s->n_layers; i++) Py_DECREF(s->layers[i]);
    PyMem_Free(s->layers);
    for (int i = 0; i < s->n_slugs; i++) Py_DECREF(s->slugs[i]);
    PyMem_Free(s->places);
    for (int i = 0; i < s->n_bc; i++) Py_DECREF(s->bc[i].name);
    PyMem_Free(s->bc);
    PickRef *picks[] = {&s->first_pick, &s->last_pick, &s->backend_pick};
    for (int i = 0; i < 3; i++) {
        Py_XDECREF(picks[i]->boundary);
        if (picks[i]->ts.kind == 2) Py_XDECREF(picks[i]->ts.obj);
    }
}

/* The callables are bound methods of the pass that owns the folder: a cycle the
 * collector must see through. */
static int Folder_traverse(Folder *f, visitproc visit, void *arg) {
    Py_VISIT(f->admit);
    Py_VISIT(f->boundary_info);
    Py_VISIT(f->ts_facts);
    Py_VISIT(f->loads);
    Py_VISIT(f->pair);
    Py_VISIT(f->terminal_bits);
    Py_VISIT(f->shared);
    Py_VISIT(f->layer_sets);
    Py_VISIT(f->event_dumps);
    for (int i = 0; i < N_NUMBERED; i++) Py_VISIT(f->numbered[i].index);
    return 0;
}

static int Folder_clear(Folder *f) {
    Py_CLEAR(f->admit);
    Py_CLEAR(f->boundary_info);
    Py_CLEAR(f->ts_facts);
    Py_CLEAR(f->loads);
    Py_CLEAR(f->pair);
    Py_CLEAR(f->terminal_bits);
    Py_CLEAR(f->shared);
    Py_CLEAR(f->layer_sets);
    Py_CLEAR(f->event_dumps);
    for (int i = 0; i < N_NUMBERED; i++) Py_CLEAR(f->numbered[i].index);
    return 0;
}

static void Folder_dealloc(Folder *f) {
    PyObject_GC_UnTrack(f);
    Folder_clear(f);
    for (int k = 0; k < f->n_fields; k++) { PyMem_Free(f->fields[k].name); PyMem_Free(f->fields[k].literal); }
    char *owned[] = {f->head, f->prefix, f->jprefix, f->markers[0], f->markers[1], f->middle, f->end,
                     f->tails[0], f->tails[1], f->failed[0], f->failed[1], f->failed[2], f->failed[3],
                     f->accounting, f->llm_response, f->scratch, f->event_room, f->event_rules};
    for (size_t i = 0; i < sizeof owned / sizeof *owned; i++) PyMem_Free(owned[i]);
    Py_XDECREF(f->k_boundary); Py_XDECREF(f->k_layer); Py_XDECREF(f->k_outcome); Py_XDECREF(f->k_ts);
    Py_XDECREF(f->k_mono); Py_XDECREF(f->k_slug); Py_XDECREF(f->k_test_id); Py_XDECREF(f->k_add_metadata);
    Py_XDECREF(f->k_past_seed);
    Py_XDECREF(f->k_t0_ms); Py_XDECREF(f->k_slug_utf8); Py_XDECREF(f->k_strings); Py_XDECREF(f->k_events);
    Py_XDECREF(f->k_left); Py_XDECREF(f->k_finish);
    names_clear(&f->names);
    names_clear(&f->triples);
    for (Py_ssize_t i = 0; i < f->tids_cap; i++) PyMem_Free(f->tids[i].bytes);
    PyMem_Free(f->tids);
    for (Py_ssize_t i = 0; i < f->n_slots; i++)
        if (f->slots[i / SLOT_CHUNK]) slot_free(SLOT(f, i));
    for (Py_ssize_t c = 0; c < f->cap_slots / SLOT_CHUNK; c++) chunk_free(f->slots[c]);
    PyMem_Free(f->slots);
    Py_TYPE(f)->tp_free((PyObject *)f);
}

static int take(PyObject *b, char **out, Py_ssize_t *len) {
    return (*out = copy_bytes(b, len)) ? 0 : -1;
}

static int Folder_init(Folder *f, PyObject *args, PyObject *kw) {
    static char *names[] = {"fields", "head", "prefix", "java_prefix", "markers", "middle", "end", "tails",
                            "tail_room", "failed", "accounting", "llm_response", "terminal_bits", "backend_bit",
                            "admit", "boundary_info", "ts_facts", "loads", "fold_aggs", "keep_lines", "max_tests",
                            "max_line", "pair", "counters", NULL};
    PyObject *fields, *head, *prefix, *jprefix, *markers, *middle, *end, *tails, *failed, *accounting, *llm, *bits;
    PyObject *admit, *info, *tsf, *loads, *pair = Py_None;
    Py_ssize_t tail_room, keep_lines, max_tests, max_line;
    int backend_bit, fold_aggs, counters = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!SSSO!SSO!nO!SSO!iOOOOpnnn|Oi", names, &PyTuple_Type, &fields, &head,
                                     &prefix, &jprefix, &PyTuple_Type, &markers, &middle, &end, &PyTuple_Type, &tails,
                                     &tail_room, &PyTuple_Type, &failed, &accounting, &llm, &PyDict_Type, &bits,
                                     &backend_bit, &admit, &info, &tsf, &loads, &fold_aggs, &keep_lines, &max_tests, &max_line, &pair, &counters))
        return -1;
    if (f->initialised) { /* its layout, strings and callables are set: once, never appended to */
        PyErr_SetString(PyExc_RuntimeError, "a Folder is initialised once");
        return -1;
    }
    f->initialised = 1; /* a failed __init__ leaves half a layout: no second try either */
    if (PyTuple_GET_SIZE(fields) > MAX_FIELDS || PyTuple_GET_SIZE(markers) != 2 || PyTuple_GET_SIZE(tails) != 2 ||
        PyTuple_GET_SIZE(failed) > 4) {
        PyErr_SetString(PyExc_ValueError, "unexpected layout");
        return -1;
    }
    if (counters < 0 || counters > MAX_COUNTERS) { /* said, never a pass turned off in silence */
        PyErr_Format(PyExc_ValueError, "%d head-only counters: the compiled fold has room for %d", counters, MAX_COUNTERS);
        return -1;
    }
    f->n_counters = counters;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(fields); k++) {
        PyObject *name, *lit;
        int kind, role;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(fields, k), "SiSi", &name, &kind, &lit, &role)) return -1;
        Field *fd = &f->fields[f->n_fields++];
        fd->kind = kind;
        fd->role = role;
        if (take(name, &fd->name, &fd->name_len) < 0 || take(lit, &fd->literal, &fd->literal_len) < 0) return -1;
        memset(fd->padded, 0, NAME_ROOM);
        fd->need = 0;
        if (fd->name_len > 0 && fd->name_len <= NAME_ROOM) {
            memcpy(fd->padded, fd->name, fd->name_len);
            fd->need = fd->name_len == 32 ? 0xffffffffu : (1u << fd->name_len) - 1;
        }
    }
    /* each role once, on a field of a kind that can hold it: the captured ones on captured
     * fields, the duration on a null-or-integer one (contract.layout) */
    int seen[N_ROLES] = {0};
    for (int k = 0; k < f->n_fields; k++) {
        Field *fd = &f->fields[k];
        int captured = fd->kind == K_CAPTURE_STR || fd->kind == K_CAPTURE_INT;
        int ok = fd->role == -1 ? !captured
               : fd->role >= 0 && fd->role < N_CAPTURES ? captured
               : fd->role == ROLE_DURATION && fd->kind == K_NULL_OR_INT;
        if (!ok || (fd->role >= 0 && seen[fd->role]++)) {
            PyErr_Format(PyExc_ValueError, "head field %d: role %d does not fit its kind %d, or is there twice", k, fd->role,
                         fd->kind);
            return -1;
        }
    }
    for (int r = 0; r < N_ROLES; r++)
        if (!seen[r]) {
            PyErr_Format(PyExc_ValueError, "no head field has the role %s", ROLE_NAMES[r]);
            return -1;
        }
    if (take(head, &f->head, &f->head_len) < 0 || take(prefix, &f->prefix, &f->prefix_len) < 0 ||
        take(jprefix, &f->jprefix, &f->jprefix_len) < 0 || take(middle, &f->middle, &f->middle_len) < 0 ||
        take(end, &f->end, &f->end_len) < 0 || take(accounting, &f->accounting, &f->accounting_len) < 0 ||
        take(llm, &f->llm_response, &f->llm_response_len) < 0)
        return -1;
    for (int k = 0; k < 2; k++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(markers, k)) || !PyBytes_Check(PyTuple_GET_ITEM(tails, k))) {
            PyErr_SetString(PyExc_TypeError, "markers and tails are bytes");
            return -1;
        }
        if (take(PyTuple_GET_ITEM(markers, k), &f->markers[k], &f->marker_lens[k]) < 0 ||
            take(PyTuple_GET_ITEM(tails, k), &f->tails[k], &f->tail_lens[k]) < 0)
            return -1;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(failed); k++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(failed, k))) { PyErr_SetString(PyExc_TypeError, "outcomes are bytes"); return -1; }
        if (take(PyTuple_GET_ITEM(failed, k), &f->failed[k], &f->failed_lens[k]) < 0) return -1;
        f->n_failed++;
    }
    f->tail_room = tail_room;
    f->terminal_bits = Py_NewRef(bits);
    if (!(f->shared = PyDict_New()) || !(f->layer_sets = PyDict_New())) return -1;
    f->backend_bit = backend_bit;
    f->admit = Py_NewRef(admit); f->boundary_info = Py_NewRef(info); f->ts_facts = Py_NewRef(tsf);
    f->loads = Py_NewRef(loads);
    f->pair = pair == Py_None ? NULL : Py_NewRef(pair);
    f->fold_aggs = fold_aggs; f->keep_lines = keep_lines; f->max_tests = max_tests; f->max_line = max_line;
    if (!(f->k_boundary = PyUnicode_InternFromString("boundary")) || !(f->k_layer = PyUnicode_InternFromString("layer")) ||
        !(f->k_outcome = PyUnicode_InternFromString("outcome")) || !(f->k_ts = PyUnicode_InternFromString("ts")) ||
        !(f->k_mono = PyUnicode_InternFromString("mono_ns")) || !(f->k_slug = PyUnicode_InternFromString("slug")) ||
        !(f->k_test_id = PyUnicode_InternFromString("test_id")) ||
        !(f->k_add_metadata = PyUnicode_InternFromString("add_metadata")) ||
        !(f->k_past_seed = PyUnicode_InternFromString("events_past_seed")) ||
        !(f->k_t0_ms = PyUnicode_InternFromString("t0_ms")) || !(f->k_slug_utf8 = PyUnicode_InternFromString("slug_utf8")) ||
        !(f->k_strings = PyUnicode_InternFromString("strings")) || !(f->k_events = PyUnicode_InternFromString("events")) ||
        !(f->k_left = PyUnicode_InternFromString("left")) || !(f->k_finish = PyUnicode_InternFromString("finish")))
        return -1;
    return 0;
}

static PyObject *Folder_get_untracked(Folder *f, void *c) { return PyLong_FromLongLong(f->untracked); }

static PyMethodDef Folder_methods[] = {
    {"buffer", (PyCFunction)Folder_buffer, METH_VARARGS,
     "buffer(buf, start, end, block, line, body, metadata, malformed): fold the lines of buf[start:end]."},
    {"fold_env", (PyCFunction)Folder_fold_env, METH_VARARGS,
     "fold_env(env, block, ls, le) -> slot, -1 (nothing more) or -2 (ts is not a time)."},
    {"set_event_format", (PyCFunction)Folder_set_event_format, METH_VARARGS,
     "set_event_format(rules, dumps, seed): how event writes a report's events (one rule per head field)."},
    {"event", (PyCFunction)(void (*)(void))Folder_event, METH_FASTCALL,
     "event(buf, ls, le, t0_ms, slug, strings) -> a report's event of a plain line, or None."},
    {"events_at", (PyCFunction)(void (*)(void))Folder_events_at, METH_FASTCALL,
     "events_at(buf, shift, lines): each (start, end, reader) line's event to its reader."},
    {"add_llm_ms", (PyCFunction)(void (*)(void))Folder_add_llm_ms, METH_FASTCALL,
     "add_llm_ms(slot, ms): an LLM call's duration added to the slot's time (a report's)."},
    {"take", (PyCFunction)Folder_take, METH_O, "take(slot) -> (agg, kept, head) of one test, its memory handed back."},
    {"counts", (PyCFunction)Folder_counts, METH_NOARGS, "counts() -> [(token, envelopes)] of count mode."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Folder_getset[] = {
    {"untracked", (getter)Folder_get_untracked, NULL, "envelopes of tests past max_tests", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject FolderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cvdiag.read._cfold.Folder",
    .tp_basicsize = sizeof(Folder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The compiled fold of one pass (see fold.py).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Folder_init,
    .tp_dealloc = (destructor)Folder_dealloc,
    .tp_traverse = (traverseproc)Folder_traverse,
    .tp_clear = (inquiry)Folder_clear,
    .tp_methods = Folder_methods,
    .tp_getset = Folder_getset,
};

/* check(the whole of arg's buffer) as a bool */
static PyObject *buffer_check(PyObject *arg, int (*check)(const char *, Py_ssize_t, Py_ssize_t)) {
    Py_buffer v;
    if (PyObject_GetBuffer(arg, &v, PyBUF_SIMPLE) < 0) return NULL;
    int ok = check(v.buf, 0, v.len);
    PyBuffer_Release(&v);
    return PyBool_FromLong(ok);
}

static PyObject *module_canonical_object(PyObject *m, PyObject *arg) { return buffer_check(arg, canonical_json_object); }

static PyObject *module_certainly_object(PyObject *m, PyObject *arg) { return buffer_check(arg, certainly_object); }

/* untouched(env, rules, edges): whether parsing.coerce certainly leaves ``env`` as it
 * is: each field of ``rules`` ((name, exact types that pass its check), ...) absent or of
 * one of its types, and every value of the object under ``edges`` None or a str. False
 * only means "run the check". */
static PyObject *module_untouched(PyObject *m, PyObject *args) {
    PyObject *env, *rules, *edges;
    if (!PyArg_ParseTuple(args, "O!O!O", &PyDict_Type, &env, &PyTuple_Type, &rules, &edges)) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(rules);
    PyObject *value = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *rule = PyTuple_GET_ITEM(rules, i), *types;
        if (!PyTuple_Check(rule) || PyTuple_GET_SIZE(rule) != 2 || !PyTuple_Check(types = PyTuple_GET_ITEM(rule, 1))) {
            PyErr_SetString(PyExc_TypeError, "rules are (name, (type, ...)) pairs");
            return NULL;
        }
        value = PyDict_GetItemWithError(env, PyTuple_GET_ITEM(rule, 0));
        if (value == NULL) {
            if (PyErr_Occurred()) return NULL;
            continue; /* an absent field stays absent */
        }
        int ok = 0;
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(types) && !ok; k++)
            ok = (PyObject *)Py_TYPE(value) == PyTuple_GET_ITEM(types, k);
        if (!ok) Py_RETURN_FALSE;
    }
    value = PyDict_GetItemWithError(env, edges);
    if (value == NULL && PyErr_Occurred()) return NULL;
    if (value != NULL && PyDict_CheckExact(value)) { /* the edge headers' values */
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(value, &pos, &k, &v))
            if (v != Py_None && !PyUnicode_CheckExact(v)) Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

/* glibc maps each allocation of more than 128 KB afresh (its threshold grows only as such
 * blocks are freed, and trimming undoes it), so every 4 MB block a reader allocates, and
 * each copy of one, costs a thousand page faults: a third of the time of reading a
 * file. Blocks up to 32 MB come from the heap instead, and up to 16 MB freed at its top
 * (a block, its copy and the next) stay there for the next block. For a process that is
 * only cvdiag (the CLI), never a host's. */
static PyObject *module_reuse_block_memory(PyObject *self, PyObject *unused) {
#ifdef __GLIBC__
    if (mallopt(M_MMAP_THRESHOLD, 32 << 20) && mallopt(M_TRIM_THRESHOLD, 8 << 20)) Py_RETURN_TRUE;
#endif
    Py_RETURN_FALSE;
}

/* newlines(buffer) -> the number of b"\n" in it: the line numbers of every block, which
 * bytes.count finds at 2 GB/s and glibc's memchr several times faster. */
static PyObject *module_newlines(PyObject *self, PyObject *arg) {
    Py_buffer v;
    if (PyObject_GetBuffer(arg, &v, PyBUF_SIMPLE) < 0) return NULL;
    const char *p = v.buf, *end = p + v.len;
    Py_ssize_t n = 0;
    Py_BEGIN_ALLOW_THREADS
    while (p < end && (p = memchr(p, '\n', end - p)) != NULL) { n++; p++; }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&v);
    return PyLong_FromSsize_t(n);
}

/* read_block(fh, carry, size) -> (block, rest, n): carry and then up to size bytes read
 * by fh.readinto into the new bytes object itself, cut after its last newline: block
 * ends on it (b"" when there is none), rest is what follows, n the bytes read. The data
 * is copied once, by the read, where carry + chunk and the cut copied all of it twice
 * more. The memory is the new object's own until it is returned (the view is released).
 *
 * Every big block takes the same amount of memory (carry and size rounded up to a
 * BLOCK_GRAIN), and is cut by its length alone, not given back in part: a block freed
 * leaves a hole the next one fits. Blocks of a different size each time (the carry
 * varies), shrunk by realloc, left holes a little too small and the heap grew to 200 MB
 * over a 1 GB file. */
#define BLOCK_GRAIN (256 << 10)
static PyObject *module_read_block(PyObject *self, PyObject *args) {
    PyObject *fh;
    Py_buffer carry;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "Oy*n", &fh, &carry, &size)) return NULL;
    if (size < 0) size = 0;
    Py_ssize_t room = carry.len + size; /* a small read (a small file) takes only its size */
    if (room > BLOCK_GRAIN) room = (room + BLOCK_GRAIN - 1) / BLOCK_GRAIN * BLOCK_GRAIN;
    PyObject *block = PyBytes_FromStringAndSize(NULL, room);
    if (!block) { PyBuffer_Release(&carry); return NULL; }
    char *p = PyBytes_AS_STRING(block);
    Py_ssize_t have = carry.len;
    memcpy(p, carry.buf, have);
    PyBuffer_Release(&carry);
    PyObject *view = PyMemoryView_FromMemory(p + have, size, PyBUF_WRITE);
    if (!view) { Py_DECREF(block); return NULL; }
    PyObject *r = PyObject_CallMethod(fh, "readinto", "O", view);
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback); /* readinto's error, kept across release() */
    PyObject *released = PyObject_CallMethod(view, "release", NULL);
    Py_DECREF(view);
    if (!released) { /* a reader that kept the view: the memory must not be written later */
        Py_XDECREF(type); Py_XDECREF(value); Py_XDECREF(traceback);
        Py_XDECREF(r);
        Py_DECREF(block);
        return NULL;
    }
    Py_DECREF(released);
    PyErr_Restore(type, value, traceback);
    if (!r) { Py_DECREF(block); return NULL; }
    Py_ssize_t n = r == Py_None ? 0 : PyLong_AsSsize_t(r);
    Py_DECREF(r);
    if (n < 0 || n > size) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_OSError, "readinto returned a count out of range");
        Py_DECREF(block);
        return NULL;
    }
    Py_ssize_t total = have + n;
    const char *nl = total ? memrchr(p, '\n', total) : NULL;
    Py_ssize_t end = nl ? nl - p + 1 : 0;
    PyObject *rest = PyBytes_FromStringAndSize(p + end, total - end);
    if (!rest) { Py_DECREF(block); return NULL; }
    if (end == 0) { /* no whole line: the block is empty, its memory given back */
        Py_DECREF(block);
        block = PyBytes_FromStringAndSize(NULL, 0);
        if (!block) { Py_DECREF(rest); return NULL; }
    } else { /* the object is new and ours alone: its length set as bytes' own resize sets it */
        Py_SET_SIZE(block, end);
        p[end] = '\0';
    }
    return Py_BuildValue("NNn", block, rest, n);
}

/* emitter_seconds(ts) -> timestamps.ts_seconds(ts) of an emitter timestamp (a str
 * YYYY-MM-DDTHH:MM:SS.mmmZ of a real UTC time), the same float: its whole second plus its
 * milliseconds / 1000.0; None for any other shape or value (ts_seconds decides). */
static PyObject *module_emitter_seconds(PyObject *self, PyObject *arg) {
    int64_t secs;
    int ms;
    if (!PyUnicode_Check(arg) || !PyUnicode_IS_ASCII(arg) ||
        !emitter_ts(NULL, (const char *)PyUnicode_DATA(arg), PyUnicode_GET_LENGTH(arg), &secs, &ms))
        Py_RETURN_NONE;
    return PyFloat_FromDouble((double)secs + (double)ms / 1000.0);
}

/* place_lines(lines, places, tag) -> n: each (block, start, end) of ``lines`` (int32
 * triples, as fold.Kept.lines gives them) appended as (start, end, tag) to places[block],
 * a list made for a block not in the dict yet; n, the triples. */
static PyObject *module_place_lines(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "place_lines(lines, places: dict, tag)");
        return NULL;
    }
    Py_buffer v;
    if (PyObject_GetBuffer(args[0], &v, PyBUF_SIMPLE) < 0) return NULL;
    const int32_t *t = v.buf;
    Py_ssize_t n = v.len / (Py_ssize_t)(3 * sizeof(int32_t));
    PyObject *places = args[1], *tag = args[2], *list = NULL;
    int32_t block = 0;
    for (Py_ssize_t k = 0; k < n; k++, t += 3) {
        if (list == NULL || t[0] != block) { /* most lines of a test share a block with the one before */
            block = t[0];
            PyObject *key = PyLong_FromLong(block);
            if (!key) goto fail;
            list = PyDict_GetItemWithError(places, key); /* borrowed: the dict keeps it */
            if (!list && !PyErr_Occurred()) {
                PyObject *fresh = PyList_New(0);
                if (fresh && PyDict_SetItem(places, key, fresh) < 0) Py_CLEAR(fresh);
                Py_XDECREF(fresh); /* the dict holds it */
                list = fresh;
            }
            Py_DECREF(key);
            if (!list) goto fail;
            if (!PyList_Check(list)) { PyErr_SetString(PyExc_TypeError, "places holds lists"); goto fail; }
        }
        PyObject *line = Py_BuildValue("(iiO)", t[1], t[2], tag);
        if (!line) goto fail;
        int rc = PyList_Append(list, line);
        Py_DECREF(line);
        if (rc < 0) goto fail;
    }
    PyBuffer_Release(&v);
    return PyLong_FromSsize_t(n);
fail:
    PyBuffer_Release(&v);
    return NULL;
}

/* unpack_places(packed) -> the bytes of int32 triples (block, start, end) that
 * keep_place packed, in the order it met them; ValueError when they are cut short. */
static int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) { *out = v; return 1; }
    }
    return 0;
}

static PyObject *module_unpack_places(PyObject *self, PyObject *arg) {
    Py_buffer v;
    if (PyObject_GetBuffer(arg, &v, PyBUF_SIMPLE) < 0) return NULL;
    const uint8_t *p = v.buf, *end = p + v.len;
    /* each place takes two bytes at least */
    PyObject *out = PyBytes_FromStringAndSize(NULL, (v.len / 2) * 3 * (Py_ssize_t)sizeof(int32_t));
    if (!out) { PyBuffer_Release(&v); return NULL; }
    int32_t *o = (int32_t *)PyBytes_AS_STRING(out), *o0 = o;
    int64_t block = 0, last_end = 0;
    while (p < end) {
        uint64_t head, start, len;
        if (!get_varint(&p, end, &head)) goto cut;
        if (head & 1) {
            block += unzigzag(head >> 1);
            if (!get_varint(&p, end, &start)) goto cut;
        } else {
            start = (uint64_t)(last_end + unzigzag(head >> 1));
        }
        if (!get_varint(&p, end, &len)) goto cut;
        last_end = (int64_t)start + (int64_t)len;
        *o++ = (int32_t)block; *o++ = (int32_t)start; *o++ = (int32_t)last_end;
    }
    PyBuffer_Release(&v);
    if (_PyBytes_Resize(&out, (char *)o - (char *)o0) < 0) return NULL;
    return out;
cut:
    PyBuffer_Release(&v);
    Py_DECREF(out);
    PyErr_SetString(PyExc_ValueError, "packed places cut short");
    return NULL;
}

/* The pages of the heap that are free, handed back to the system: a pass over a big log
 * leaves tens of MB free between live objects, which the RSS keeps until then. */
static PyObject *module_release_free_memory(PyObject *self, PyObject *unused) {
#ifdef __GLIBC__
    malloc_trim(0);
#endif
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"read_block", module_read_block, METH_VARARGS, "carry and what fh reads next, cut after the last newline"},
    {"reuse_block_memory", module_reuse_block_memory, METH_NOARGS,
     "reuse_block_memory() -> whether the C allocator now keeps big blocks for reuse (glibc only)."},
    {"newlines", module_newlines, METH_O, "newlines(buffer) -> how many newline bytes it holds."},
    {"emitter_seconds", module_emitter_seconds, METH_O,
     "emitter_seconds(ts) -> ts_seconds(ts) of an emitter timestamp, or None for another shape (ts_seconds decides)."},
    {"place_lines", (PyCFunction)(void (*)(void))module_place_lines, METH_FASTCALL,
     "place_lines(lines, places, tag) -> n: each (block, start, end) int32 triple as (start, end, tag) in places[block]."},
    {"set_result_classes", module_set_result_classes, METH_O,
     "set_result_classes({name: class}) -> None: the results built as these classes of slots (contract.layout.RESULTS)."},
    {"unpack_places", module_unpack_places, METH_O,
     "unpack_places(packed) -> the bytes of the int32 triples (block, start, end) a folder kept packed."},
    {"release_free_memory", module_release_free_memory, METH_NOARGS,
     "release_free_memory() -> None: the heap's free pages handed back (glibc only)."},
    {"untouched", module_untouched, METH_VARARGS,
     "untouched(env, rules) -> whether parsing.coerce certainly has nothing to change (False: run it)."},
    {"canonical_object", module_canonical_object, METH_O,
     "canonical_object(data) -> whether data is one JSON object orjson writes back byte for byte once read."},
    {"certainly_object", module_certainly_object, METH_O,
     "certainly_object(data) -> whether data is certainly one JSON object (False: orjson decides)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cfold", "The compiled fold of the tests pass.", -1,
                                    module_methods};

/* ROLES: the roles of head fields this fold keeps, in its order (contract.layout.ROLES). */
static int add_roles(PyObject *m) {
    PyObject *roles = PyTuple_New(N_ROLES);
    if (!roles) return -1;
    for (int r = 0; r < N_ROLES; r++) {
        PyObject *name = PyUnicode_FromString(ROLE_NAMES[r]);
        if (!name) { Py_DECREF(roles); return -1; }
        PyTuple_SET_ITEM(roles, r, name);
    }
    int rc = PyModule_AddObjectRef(m, "ROLES", roles);
    Py_DECREF(roles);
    return rc;
}

/* RESULTS: {name: its field names} of take()'s named results (contract.layout.RESULTS), and
 * each type under its name. */
static int add_results(PyObject *m) {
    PyObject *names = PyDict_New();
    if (!names) return -1;
    for (int r = 0; r < N_RESULTS; r++) {
        if (!RESULT_TYPES[r] && !(RESULT_TYPES[r] = PyStructSequence_NewType(&RESULT_DESCS[r]))) goto fail;
        PyObject *fields = PyTuple_New(RESULT_DESCS[r].n_in_sequence);
        if (!fields) goto fail;
        for (int i = 0; i < RESULT_DESCS[r].n_in_sequence; i++) {
            PyObject *field = PyUnicode_FromString(RESULT_DESCS[r].fields[i].name);
            if (!field) { Py_DECREF(fields); goto fail; }
            PyTuple_SET_ITEM(fields, i, field);
        }
        const char *name = strrchr(RESULT_DESCS[r].name, '.') + 1; /* its module's name off */
        int rc = PyDict_SetItemString(names, name, fields);
        Py_DECREF(fields);
        if (rc < 0 || PyModule_AddObjectRef(m, name, (PyObject *)RESULT_TYPES[r]) < 0) goto fail;
    }
    int rc = PyModule_AddObjectRef(m, "RESULTS", names);
    Py_DECREF(names);
    return rc;
fail:
    Py_DECREF(names);
    return -1;
}

PyMODINIT_FUNC PyInit__cfold(void) {
    if (PyType_Ready(&FolderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (add_results(m) < 0) { Py_DECREF(m); return NULL; }
    if (PyModule_AddObjectRef(m, "Folder", (PyObject *)&FolderType) < 0 ||
        PyModule_AddIntConstant(m, "COUNTERS", MAX_COUNTERS) < 0 || add_roles(m) < 0 ||
        PyModule_AddStringConstant(m, "SOURCE_HASH", CVDIAG_SOURCE_HASH) < 0 ||
#ifdef CVDIAG_SSE2
        PyModule_AddIntConstant(m, "SSE2", 1) < 0) {
#else
        PyModule_AddIntConstant(m, "SSE2", 0) < 0) {
#endif
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
