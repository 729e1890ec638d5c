/* The compiled envelope of the emit path: cvdiag.write._cemit.
 *
 * (And pick(), the middleware's scan of raw headers for the names it reads, twice per
 * request: see the end of this file.)
 *
 * emitter._emit calls line() once the gate has said a line is written: from the
 * boundary, the context's ids, the caller's numbers and metadata to the bytes queued,
 * in one C call -- the span id, the wire time, the monotonic clock, the scrubbing
 * decisions and the JSON, byte for byte what the Python path (_steps: _drop_unknown,
 * _scrub, _render) writes.
 *
 * Python is still called for what it alone decides: every string scrubbed (the
 * scrubber's functions, handed over by setup()), a demo not yet written, edge headers a
 * request sent, and any value that is not a str, int, bool or None (orjson writes it,
 * and its bytes are copied into the line). line() returns None, having changed
 * nothing, whenever the Python path must decide: metadata that is not a dict or holds
 * keys the boundary does not declare, a boundary not yet in the cache of
 * sensitive_boundaries, a value orjson refuses (a lone surrogate, an int past 64
 * bits), a line past its cap, a year outside 1..9999. The emitter then takes the
 * Python path from the start.
 *
 * Strings are written as orjson writes them: '"' and '\\' escaped, the control
 * characters below 0x20 as \b \t \n \f \r or \u00xx (lower-case hex), everything
 * else as its UTF-8 bytes (tests/test_emit_compiled.py holds the two paths to the
 * same bytes).
 */
#define PY_SSIZE_T_CLEAN
#ifndef CVDIAG_SOURCE_HASH /* setup.py builds in the hash of this file (cvdiag.contract.compiled) */
#define CVDIAG_SOURCE_HASH ""
#endif
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* -- what setup() hands over -------------------------------------------------------- */
static PyObject *dumps;          /* orjson.dumps */
static PyObject *time_ns;        /* time.time_ns */
static PyObject *monotonic_ns;   /* time.monotonic_ns */
static PyObject *getrandbits;    /* random.getrandbits */
static PyObject *demos;          /* emitter._DEMOS: demo -> its written form */
static PyObject *written_demo;   /* emitter._written_demo */
static PyObject *sensitive;      /* state.sensitive_boundaries: name -> walk numbers too */
static PyObject *scrub;          /* scrubber.scrub */
static PyObject *scrub_values;   /* scrubber.scrub_values_of */
static PyObject *scrub_tree;     /* scrubber.scrub_tree */
static PyObject *scrubbed_edge;  /* emitter._scrubbed_edge */
static PyObject *no_edge;        /* _caps.NO_EDGE_HEADERS */
static PyObject *no_edge_json;   /* its JSON, as bytes */
static PyObject *prefix;         /* b'{"schema_version":<n>,"test_id":' */
static PyObject *sixty_four;     /* 64 */
static PyObject *s_metadata, *s_layer;

/* -- an output buffer --------------------------------------------------------------- */
typedef struct {
    char *data;
    Py_ssize_t len, size;
    char local[1024];
} Buf;

static int grow(Buf *b, Py_ssize_t more) {
    Py_ssize_t want = b->len + more;
    if (want <= b->size)
        return 0;
    Py_ssize_t size = b->size * 2 > want ? b->size * 2 : want;
    char *data = b->data == b->local ? PyMem_Malloc(size) : PyMem_Realloc(b->data, size);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (b->data == b->local)
        memcpy(data, b->local, b->len);
    b->data = data;
    b->size = size;
    return 0;
}

static int put(Buf *b, const char *s, Py_ssize_t n) {
    if (grow(b, n) < 0)
        return -1;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return 0;
}

#define PUT_LIT(b, lit) put((b), (lit), (Py_ssize_t)sizeof(lit) - 1)

/* Return codes of the writers below: 0 written, -1 a Python error to raise, 1 the
 * Python path must decide (the error, if any, cleared). */
#define FALLBACK 1

static const char HEX[] = "0123456789abcdef";

/* A str as orjson writes it; FALLBACK for one UTF-8 cannot hold (a lone surrogate). */
static int put_str(Buf *b, PyObject *s) {
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    if (u == NULL) {
        PyErr_Clear();
        return FALLBACK;
    }
    if (grow(b, n * 6 + 2) < 0) /* every byte escaped at worst */
        return -1;
    char *out = b->data + b->len;
    *out++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)u[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *out++ = (char)c;
            continue;
        }
        *out++ = '\\';
        switch (c) {
        case '"': *out++ = '"'; break;
        case '\\': *out++ = '\\'; break;
        case '\b': *out++ = 'b'; break;
        case '\t': *out++ = 't'; break;
        case '\n': *out++ = 'n'; break;
        case '\f': *out++ = 'f'; break;
        case '\r': *out++ = 'r'; break;
        default:
            *out++ = 'u';
            *out++ = '0';
            *out++ = '0';
            *out++ = HEX[c >> 4];
            *out++ = HEX[c & 15];
        }
    }
    *out++ = '"';
    b->len = out - b->data;
    return 0;
}

/* Decimal digits without snprintf (a few hundred instructions a call, several per line). */
static int put_i64(Buf *b, long long v) {
    char digits[24];
    char *end = digits + sizeof digits, *p = end;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    return put(b, p, end - p);
}

static void two_digits(char *out, int v) {
    out[0] = (char)('0' + v / 10);
    out[1] = (char)('0' + v % 10);
}

/* Any value: the common kinds here, the rest as orjson writes them (FALLBACK when it refuses). */
static int put_value(Buf *b, PyObject *v) {
    if (PyUnicode_CheckExact(v))
        return put_str(b, v);
    if (v == Py_None)
        return PUT_LIT(b, "null");
    if (v == Py_True)
        return PUT_LIT(b, "true");
    if (v == Py_False)
        return PUT_LIT(b, "false");
    if (PyLong_CheckExact(v)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (!overflow && !(x == -1 && PyErr_Occurred()))
            return put_i64(b, x);
        PyErr_Clear(); /* past int64: orjson's answer below (up to 2**64 - 1) */
    }
    PyObject *json = PyObject_CallOneArg(dumps, v);
    if (json == NULL) {
        PyErr_Clear();
        return FALLBACK;
    }
    int r = put(b, PyBytes_AS_STRING(json), PyBytes_GET_SIZE(json));
    Py_DECREF(json);
    return r;
}

/* A dict whose keys orjson takes (exact str); values by put_value. */
static int put_dict(Buf *b, PyObject *d) {
    if (!PyDict_CheckExact(d))
        return put_value(b, d);
    if (PUT_LIT(b, "{") < 0)
        return -1;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    int first = 1, r;
    while (PyDict_Next(d, &pos, &k, &v)) {
        if (!PyUnicode_CheckExact(k))
            return FALLBACK; /* orjson refuses it: the Python path says how */
        if (!first && PUT_LIT(b, ",") < 0)
            return -1;
        first = 0;
        if ((r = put_str(b, k)) != 0 || (r = PUT_LIT(b, ":")) != 0)
            return r;
        Py_INCREF(v); /* a value orjson writes runs no Python, but stay safe */
        r = put_value(b, v);
        Py_DECREF(v);
        if (r != 0)
            return r;
    }
    return PUT_LIT(b, "}");
}

#define PUT_FIELD(b, lit, value)                                     \
    do {                                                             \
        if ((r = PUT_LIT(b, lit)) != 0 || (r = put_value(b, value)) != 0) \
            goto done;                                               \
    } while (0)

/* -- the wire time: YYYY-MM-DDTHH:MM:SS.mmmZ, the whole second written once ----------
 * The cache is two C globals read and written without a lock: safe because every call
 * of line() holds the GIL and runs no Python between the two. The module is single-phase
 * (one state per process): a free-threaded build turns the GIL back on when it imports it
 * (it declares no Py_mod_gil), and an interpreter with a GIL of its own refuses to import
 * it. Per-module state would be needed before either changes (docs/architecture.md). */
static long long written_second = LLONG_MIN;
static char written_text[20];

static int put_ts(Buf *b, long long ns) {
    long long seconds = ns / 1000000000, rest = ns % 1000000000;
    if (rest < 0) { /* floor division, as Python's divmod */
        rest += 1000000000;
        seconds -= 1;
    }
    if (seconds != written_second) {
        time_t t = (time_t)seconds;
        struct tm tm;
        if ((long long)t != seconds || gmtime_r(&t, &tm) == NULL)
            return FALLBACK;
        int year = tm.tm_year + 1900;
        if (year < 1 || year > 9999)
            return FALLBACK; /* wire_ts raises: the Python path does */
        snprintf(written_text, sizeof written_text, "%04d-%02d-%02dT%02d:%02d:%02d", year, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
        written_second = seconds;
    }
    char text[26]; /* "YYYY-MM-DDTHH:MM:SS.mmmZ" */
    int ms = (int)(rest / 1000000);
    text[0] = '"';
    memcpy(text + 1, written_text, 19);
    text[20] = '.';
    text[21] = (char)('0' + ms / 100);
    two_digits(text + 22, ms % 100);
    text[24] = 'Z';
    text[25] = '"';
    return put(b, text, sizeof text);
}

/* ``clock()`` (time.time_ns or time.monotonic_ns). On Linux both are clock_gettime of
 * CLOCK_REALTIME and CLOCK_MONOTONIC in CPython, read here without the call; elsewhere
 * the Python function is called. */
static int clock_ns(PyObject *clock, long long *out) {
#ifdef __linux__
    struct timespec ts;
    if (clock_gettime(clock == time_ns ? CLOCK_REALTIME : CLOCK_MONOTONIC, &ts) == 0) {
        *out = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
        return 0;
    }
#endif
    PyObject *now = PyObject_CallNoArgs(clock);
    if (now == NULL)
        return -1;
    *out = PyLong_AsLongLong(now);
    Py_DECREF(now);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* -- metadata: the decisions of _drop_unknown and _scrub ------------------------------- */
static int plain(PyObject *v) {
    PyTypeObject *t = Py_TYPE(v);
    return t == &PyLong_Type || t == &PyFloat_Type || t == &PyBool_Type || v == Py_None;
}

/* The metadata to write (a new reference), or NULL with *fallback set when the Python
 * path must decide, or NULL with an error. */
static PyObject *metadata_to_write(PyObject *name, PyObject *metadata, PyObject *known, int *fallback) {
    if (metadata == Py_None || (PyDict_CheckExact(metadata) && PyDict_GET_SIZE(metadata) == 0))
        return PyDict_New();
    if (!PyDict_CheckExact(metadata) || (known != Py_None && !PyAnySet_Check(known))) {
        *fallback = 1; /* a Mapping, or a Boundary made by hand: the Python steps */
        return NULL;
    }
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    int all_plain = 1, flat = 1; /* flat: every value a str or plain */
    if (known != Py_None) { /* keys the boundary does not declare: _drop_unknown's */
        while (PyDict_Next(metadata, &pos, &k, &v)) {
            if (!PyUnicode_CheckExact(k)) { /* its hash or equality may run Python: the Python path */
                *fallback = 1;
                return NULL;
            }
            int in = PySet_Contains(known, k);
            if (in < 0)
                return NULL;
            if (!in) {
                *fallback = 1;
                return NULL;
            }
            if (!plain(v)) {
                all_plain = 0;
                flat = flat && PyUnicode_CheckExact(v);
            }
        }
    } else {
        while (all_plain && PyDict_Next(metadata, &pos, &k, &v))
            all_plain = plain(v);
    }
    PyObject *walk = PyDict_GetItemWithError(sensitive, name);
    if (walk == NULL) {
        if (PyErr_Occurred())
            return NULL;
        *fallback = 1; /* _walks_numbers fills the cache on the Python path */
        return NULL;
    }
    if (walk == Py_True) /* every key tested, numbers too */
        return PyObject_CallOneArg(scrub_tree, metadata);
    if (all_plain) /* nothing to scrub */
        return Py_NewRef(metadata);
    /* Declared keys only, none of them a secret's name: the values alone. */
    if (!flat)
        return PyObject_CallOneArg(scrub_values, metadata);
    /* scrub_values_of of strings and numbers, without its frames: each string scrubbed */
    PyObject *out = PyDict_New();
    if (out == NULL)
        return NULL;
    pos = 0;
    while (PyDict_Next(metadata, &pos, &k, &v)) {
        Py_INCREF(k); /* scrub runs Python: another thread may change the caller's dict */
        PyObject *w = PyUnicode_CheckExact(v) ? PyObject_CallOneArg(scrub, v) : Py_NewRef(v);
        int failed = w == NULL || PyDict_SetItem(out, k, w) < 0;
        Py_DECREF(k);
        Py_XDECREF(w);
        if (failed) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

/* -- line() ------------------------------------------------------------------------- */
static PyObject *line(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "line() takes 11 arguments");
        return NULL;
    }
    if (dumps == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_cemit.setup() was not called");
        return NULL;
    }
    PyObject *boundary = args[0], *name = args[1], *test_id = args[2], *trace_id = args[3], *slug = args[4],
             *demo = args[5], *duration = args[6], *outcome = args[7], *edge = args[8], *metadata = args[9];
    Py_ssize_t cap = PyLong_AsSsize_t(args[10]);
    if (cap == -1 && PyErr_Occurred())
        return NULL;
    PyObject *known = NULL, *layer = NULL, *written = NULL, *meta = NULL, *edge_written = NULL;
    PyObject *result = NULL;
    long long now_ns, mono;
    Buf b;
    b.data = b.local;
    b.len = 0;
    b.size = sizeof b.local;
    int r = -1, fallback = 0;

    if (clock_ns(time_ns, &now_ns) < 0)
        goto done;
    PyObject *bits = PyObject_CallOneArg(getrandbits, sixty_four);
    if (bits == NULL)
        goto done;
    unsigned long long span_bits = PyLong_AsUnsignedLongLong(bits);
    Py_DECREF(bits);
    if (span_bits == (unsigned long long)-1 && PyErr_Occurred())
        goto done;
    if (clock_ns(monotonic_ns, &mono) < 0)
        goto done;
    if ((known = PyObject_GetAttr(boundary, s_metadata)) == NULL || (layer = PyObject_GetAttr(boundary, s_layer)) == NULL)
        goto done;
    meta = metadata_to_write(name, metadata, known, &fallback);
    if (meta == NULL) {
        r = fallback ? FALLBACK : -1;
        goto done;
    }
    /* the demo: written once per value (_DEMOS), as _scrub does */
    written = PyUnicode_CheckExact(demo) ? PyDict_GetItemWithError(demos, demo) : NULL;
    if (written != NULL)
        Py_INCREF(written);
    else if (PyErr_Occurred() || (written = PyObject_CallOneArg(written_demo, demo)) == NULL)
        goto done;
    if (edge != Py_None && edge != no_edge && (edge_written = PyObject_CallOneArg(scrubbed_edge, edge)) == NULL)
        goto done;
    if (!(PyLong_Check(duration) && !PyBool_Check(duration)))
        duration = Py_None;

    if ((r = put(&b, PyBytes_AS_STRING(prefix), PyBytes_GET_SIZE(prefix))) != 0 || (r = put_value(&b, test_id)) != 0)
        goto done;
    PUT_FIELD(&b, ",\"trace_id\":", trace_id);
    char span_text[16]; /* "%016x": lower-case hex, zero-padded */
    for (int i = 15; i >= 0; i--, span_bits >>= 4)
        span_text[i] = HEX[span_bits & 15];
    if ((r = PUT_LIT(&b, ",\"span_id\":\"")) != 0 || (r = put(&b, span_text, 16)) != 0 ||
        (r = PUT_LIT(&b, "\",\"parent_span_id\":null")) != 0)
        goto done;
    PUT_FIELD(&b, ",\"layer\":", layer);
    PUT_FIELD(&b, ",\"boundary\":", name);
    PUT_FIELD(&b, ",\"slug\":", slug);
    PUT_FIELD(&b, ",\"demo\":", written);
    if ((r = PUT_LIT(&b, ",\"ts\":")) != 0 || (r = put_ts(&b, now_ns)) != 0)
        goto done;
    if ((r = PUT_LIT(&b, ",\"mono_ns\":")) != 0 || (r = put_i64(&b, mono)) != 0)
        goto done;
    PUT_FIELD(&b, ",\"duration_ms\":", duration);
    PUT_FIELD(&b, ",\"outcome\":", outcome);
    if ((r = PUT_LIT(&b, ",\"edge_headers\":")) != 0)
        goto done;
    if (edge_written == NULL)
        r = put(&b, PyBytes_AS_STRING(no_edge_json), PyBytes_GET_SIZE(no_edge_json));
    else
        r = put_dict(&b, edge_written);
    if (r != 0 || (r = PUT_LIT(&b, ",\"metadata\":")) != 0 || (r = put_dict(&b, meta)) != 0)
        goto done;
    r = PUT_LIT(&b, ",\"_metadata_dropped\":false,\"_truncated\":false}");
done:
    if (r == 0 && b.len > cap)
        r = FALLBACK; /* the shrink ladder of _caps.render_capped */
    if (r == 0) {
        result = PyBytes_FromStringAndSize(b.data, b.len);
    } else if (r == FALLBACK) {
        PyErr_Clear();
        result = Py_NewRef(Py_None);
    }
    if (b.data != b.local)
        PyMem_Free(b.data);
    Py_XDECREF(known);
    Py_XDECREF(layer);
    Py_XDECREF(written);
    Py_XDECREF(meta);
    Py_XDECREF(edge_written);
    return result;
}

/* -- pick(): the middleware's _pick of raw ASGI headers -------------------------------- */
static PyObject *pick_fallback; /* middleware._pick, for what pick() does not read itself */

/* ``key.lower()`` when ``key`` has an upper-case ASCII letter; NULL (no error) when not. */
static PyObject *lowered(PyObject *key) {
    const char *s = PyBytes_AS_STRING(key);
    Py_ssize_t n = PyBytes_GET_SIZE(key), i = 0;
    while (i < n && !(s[i] >= 'A' && s[i] <= 'Z'))
        i++;
    if (i == n)
        return NULL;
    /* A fresh object, filled here: PyBytes_FromStringAndSize(s, 1) would hand back the
     * shared one-byte bytes, which must never be changed in place. */
    PyObject *out = PyBytes_FromStringAndSize(NULL, n);
    if (out == NULL)
        return NULL;
    char *o = PyBytes_AS_STRING(out);
    memcpy(o, s, n);
    for (; i < n; i++)
        if (o[i] >= 'A' && o[i] <= 'Z')
            o[i] = (char)(o[i] + ('a' - 'A'));
    return out;
}

/* The first value of each wanted (lower-case) name, as _pick finds it; headers that are
 * not a list or tuple of (bytes, value) pairs go to _pick itself. */
static PyObject *pick(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "pick() takes 2 arguments");
        return NULL;
    }
    PyObject *headers = args[0], *wanted = args[1];
    if (pick_fallback == NULL || !(PyList_CheckExact(headers) || PyTuple_CheckExact(headers)) || !PyAnySet_Check(wanted))
        goto python;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(headers);
    PyObject **items = PySequence_Fast_ITEMS(headers);
    for (Py_ssize_t i = 0; i < n; i++) { /* checked first: nothing below may meet another shape */
        PyObject *item = items[i];
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2 || !PyBytes_CheckExact(PyTuple_GET_ITEM(item, 0)))
            goto python;
    }
    PyObject *found = PyDict_New();
    if (found == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) { /* bytes hash and compare in C: the list cannot change */
        PyObject *key = PyTuple_GET_ITEM(items[i], 0), *lower = NULL;
        int in = PySet_Contains(wanted, key);
        if (in == 0 && (lower = lowered(key)) != NULL) {
            key = lower;
            in = PySet_Contains(wanted, key);
        } else if (in == 0 && PyErr_Occurred()) {
            in = -1;
        }
        if (in > 0 && (in = PyDict_Contains(found, key)) == 0)
            in = PyDict_SetItem(found, key, PyTuple_GET_ITEM(items[i], 1));
        Py_XDECREF(lower);
        if (in < 0) {
            Py_DECREF(found);
            return NULL;
        }
    }
    return found;
python:
    if (pick_fallback == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_cemit.set_pick_fallback() was not called");
        return NULL;
    }
    return PyObject_Vectorcall(pick_fallback, args, 2, NULL);
}

static PyObject *set_pick_fallback(PyObject *self, PyObject *fallback) {
    Py_XSETREF(pick_fallback, Py_NewRef(fallback));
    Py_RETURN_NONE;
}

static PyObject *setup(PyObject *self, PyObject *args) {
    PyObject *o[14];
    if (!PyArg_ParseTuple(args, "OOOOO!O!OOOOOOO!O!", &o[0], &o[1], &o[2], &o[3], &PyDict_Type, &o[4], &PyDict_Type,
                          &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &o[11], &PyBytes_Type, &o[12], &PyBytes_Type,
                          &o[13]))
        return NULL;
    PyObject **slots[] = {&dumps,        &time_ns,    &monotonic_ns,  &getrandbits, &demos,        &sensitive, &written_demo,
                          &scrub,        &scrub_values, &scrub_tree, &scrubbed_edge, &no_edge,   &no_edge_json, &prefix};
    for (int i = 0; i < 14; i++)
        Py_XSETREF(*slots[i], Py_NewRef(o[i]));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"line", (PyCFunction)(void (*)(void))line, METH_FASTCALL,
     "line(boundary, name, test_id, trace_id, slug, demo, duration_ms, outcome, edge_headers, metadata, cap) -> "
     "the envelope's bytes, or None when the Python path must write it."},
    {"setup", setup, METH_VARARGS,
     "setup(dumps, time_ns, monotonic_ns, getrandbits, demos, sensitive, written_demo, scrub, scrub_values_of, scrub_tree, "
     "scrubbed_edge, no_edge_headers, no_edge_json, prefix): what line() calls (emitter._compiled_line)."},
    {"pick", (PyCFunction)(void (*)(void))pick, METH_FASTCALL,
     "pick(headers, wanted) -> {name: first value} of the wanted names, as middleware._pick."},
    {"set_pick_fallback", set_pick_fallback, METH_O, "set_pick_fallback(_pick): what pick() hands other shapes to."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cemit", "The compiled envelope of the emit path.", -1,
                                    methods};

/* FIELDS: the envelope's fields in the order line() writes them: the emitter refuses this
 * module when they are not contract.schema.ENVELOPE_FIELDS (contract.layout). */
static const char *const WRITTEN[] = {"schema_version", "test_id", "trace_id", "span_id", "parent_span_id", "layer",
                                      "boundary", "slug", "demo", "ts", "mono_ns", "duration_ms", "outcome",
                                      "edge_headers", "metadata", "_metadata_dropped", "_truncated"};

static int add_fields(PyObject *m) {
    Py_ssize_t n = (Py_ssize_t)(sizeof WRITTEN / sizeof *WRITTEN);
    PyObject *fields = PyTuple_New(n);
    if (fields == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = PyUnicode_FromString(WRITTEN[i]);
        if (name == NULL) {
            Py_DECREF(fields);
            return -1;
        }
        PyTuple_SET_ITEM(fields, i, name);
    }
    int rc = PyModule_AddObjectRef(m, "FIELDS", fields);
    Py_DECREF(fields);
    return rc;
}

PyMODINIT_FUNC PyInit__cemit(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    sixty_four = PyLong_FromLong(64);
    s_metadata = PyUnicode_InternFromString("metadata");
    s_layer = PyUnicode_InternFromString("layer");
    if (sixty_four == NULL || s_metadata == NULL || s_layer == NULL ||
        PyModule_AddStringConstant(m, "SOURCE_HASH", CVDIAG_SOURCE_HASH) < 0 || add_fields(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
