/* The compiled half of the audit's ledger pass (gpuharness.audit.ledger_pass): per 4 MB block of jobs.jsonl, it
 * proves each line strict JSON that matches the job schema and extracts the fields the job rules read; and it finds
 * the lines that may hold a secret.
 *
 * It never decides against a line. A line it cannot prove (any escape in a string, a timestamp not in the canonical
 * form YYYY-MM-DDTHH:MM:SS.mmmZ, a duplicate known key, a number with a long mantissa, deep nesting, anything
 * malformed or outside the schema) comes back as its raw bytes, and the Python pass (orjson, jsonschema-rs, and
 * jsonschema for the message) decides it exactly as it would without this module. So a line it accepts is one
 * orjson parses to the same values and the job schema accepts; tests/test_linescan.py checks that on generated
 * and mutated lines.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define DOUBT (-1)
#define MAX_DEPTH 64

enum field {
    F_ID, F_DEPLOYMENT, F_STATUS, F_TS, F_PROVIDER, F_MODEL, F_WORKFLOW, F_WORKFLOW_VERSION, F_INPUTS, F_STARTED,
    F_COMPLETED, F_DURATION, F_COST, F_GPU, F_ARTIFACTS, F_ERROR, F_CAUSE, F_PID, F_HOST, F_ATTEMPT, F_CORRECTION,
    F_REASON, F_COUNT
};
static const char *FIELD_NAMES[F_COUNT] = {
    "id", "deployment_id", "status", "ts", "provider", "model", "workflow", "workflow_version", "inputs",
    "started_at", "completed_at", "duration_s", "cost_usd", "gpu", "artifacts", "error", "cause", "pid", "host",
    "attempt", "correction", "reason"};

enum artifact_field { A_NAME, A_URI, A_REMOTE_PATH, A_SHA256, A_SIZE, A_SYNCED_AT, A_DISCARDED, A_COUNT };
static const char *ARTIFACT_NAMES[A_COUNT] = {"name", "uri", "remote_path", "sha256", "size", "synced_at",
                                              "discarded"};

#define STATUS_COUNT 6
static const char *STATUS_NAMES[STATUS_COUNT] = {"queued", "running", "completed", "failed", "cancelled",
                                                 "interrupted"};
static PyObject *STATUS_OBJECTS[STATUS_COUNT];
static unsigned char LOWER[256];
/* ASCII that a string may hold as is: not a control character, quote or backslash */
static unsigned char PLAIN[256];

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
} cursor;

typedef struct {
    const unsigned char *s;
    Py_ssize_t n;
} span;

/* ---- lexical ------------------------------------------------------------------------------------------------ */

static inline void skip_ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r')) c->p++;
}

static inline int cont(const unsigned char *p, const unsigned char *end, int k) {
    for (int i = 1; i <= k; i++) {
        if (p + i >= end || (p[i] & 0xC0) != 0x80) return 0;
    }
    return 1;
}

/* A string without escapes: its bytes (valid UTF-8, no control character) are its text. */
static int parse_string(cursor *c, span *out) {
    if (c->p >= c->end || *c->p != '"') return DOUBT;
    const unsigned char *p = ++c->p;
    const unsigned char *end = c->end;
    while (p < end) {
        while (p < end && PLAIN[*p]) p++;
        if (p >= end) break;
        unsigned char b = *p;
        if (b == '"') {
            out->s = c->p;
            out->n = p - c->p;
            c->p = p + 1;
            return 0;
        }
        if (b == '\\' || b < 0x20) return DOUBT;
        if (b < 0x80) {
            p++;
            continue;
        }
        if (b >= 0xC2 && b <= 0xDF) {
            if (!cont(p, end, 1)) return DOUBT;
            p += 2;
        } else if (b >= 0xE0 && b <= 0xEF) {
            if (!cont(p, end, 2)) return DOUBT;
            if (b == 0xE0 && p[1] < 0xA0) return DOUBT;
            if (b == 0xED && p[1] > 0x9F) return DOUBT; /* surrogates */
            p += 3;
        } else if (b >= 0xF0 && b <= 0xF4) {
            if (!cont(p, end, 3)) return DOUBT;
            if (b == 0xF0 && p[1] < 0x90) return DOUBT;
            if (b == 0xF4 && p[1] > 0x8F) return DOUBT;
            p += 4;
        } else {
            return DOUBT;
        }
    }
    return DOUBT;
}

static inline int literal(cursor *c, const char *word, Py_ssize_t n) {
    if (c->end - c->p < n || memcmp(c->p, word, (size_t)n) != 0) return DOUBT;
    c->p += n;
    return 0;
}

enum number_kind { N_INT, N_FLOAT };

/* A JSON number with at most 15 mantissa digits and an exponent of at most 2 digits: exact as an int, finite and
 * correctly rounded as a float, as orjson reads it. Its value is computed only when `dval` is not NULL. */
static int parse_number(cursor *c, int *kind, long long *ival, double *dval) {
    const unsigned char *start = c->p, *p = c->p, *end = c->end;
    int digits = 0;
    int is_float = 0;
    if (p < end && *p == '-') p++;
    if (p >= end) return DOUBT;
    if (*p == '0') {
        p++;
        digits = 1;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
            digits++;
        }
    } else {
        return DOUBT;
    }
    if (p < end && *p == '.') {
        is_float = 1;
        p++;
        const unsigned char *frac = p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        if (p == frac) return DOUBT;
        digits += (int)(p - frac);
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        is_float = 1;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        const unsigned char *exp = p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        if (p == exp || p - exp > 2) return DOUBT;
    }
    if (digits > 15) return DOUBT;
    if (!is_float) {
        long long value = 0;
        for (const unsigned char *q = start + (*start == '-'); q < p; q++) value = value * 10 + (*q - '0');
        *kind = N_INT;
        *ival = *start == '-' ? -value : value;
        if (dval != NULL) *dval = (double)*ival;
        c->p = p;
        return 0;
    }
    *kind = N_FLOAT;
    if (dval == NULL) {
        c->p = p;
        return 0;
    }
    char buffer[48];
    Py_ssize_t n = p - start;
    if (n >= (Py_ssize_t)sizeof(buffer)) return DOUBT;
    memcpy(buffer, start, (size_t)n);
    buffer[n] = '\0';
    c->p = p;
    double value = PyOS_string_to_double(buffer, NULL, NULL);
    if (value == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return DOUBT;
    }
    if (!isfinite(value)) return DOUBT;
    *dval = value;
    return 0;
}

static int skip_value(cursor *c, int depth);

/* A JSON object: `member` reads the value of each key (the cursor on the value); DOUBT if it or the syntax fails. */
typedef int (*member_reader)(cursor *c, span key, void *context);

static int each_member(cursor *c, member_reader member, void *context) {
    if (c->p >= c->end || *c->p != '{') return DOUBT;
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 0;
    }
    for (;;) {
        span key;
        skip_ws(c);
        if (parse_string(c, &key) < 0) return DOUBT;
        skip_ws(c);
        if (c->p >= c->end || *c->p != ':') return DOUBT;
        c->p++;
        skip_ws(c);
        if (member(c, key, context) < 0) return DOUBT;
        skip_ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        if (c->p < c->end && *c->p == '}') {
            c->p++;
            return 0;
        }
        return DOUBT;
    }
}

/* A JSON array: `element` reads each element; DOUBT if it or the syntax fails. */
typedef int (*element_reader)(cursor *c, void *context);

static int each_element(cursor *c, element_reader element, void *context) {
    if (c->p >= c->end || *c->p != '[') return DOUBT;
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == ']') {
        c->p++;
        return 0;
    }
    for (;;) {
        skip_ws(c);
        if (element(c, context) < 0) return DOUBT;
        skip_ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        if (c->p < c->end && *c->p == ']') {
            c->p++;
            return 0;
        }
        return DOUBT;
    }
}

/* the reader of any value one level deeper than *(int *)depth */
static int skip_member(cursor *c, span key, void *depth) {
    (void)key;
    return skip_value(c, *(int *)depth + 1);
}

static int skip_element(cursor *c, void *depth) { return skip_value(c, *(int *)depth + 1); }

static int skip_value(cursor *c, int depth) {
    if (depth > MAX_DEPTH || c->p >= c->end) return DOUBT;
    span s;
    int kind;
    long long ival;
    switch (*c->p) {
        case '"': return parse_string(c, &s);
        case '{': return each_member(c, skip_member, &depth);
        case '[': return each_element(c, skip_element, &depth);
        case 't': return literal(c, "true", 4);
        case 'f': return literal(c, "false", 5);
        case 'n': return literal(c, "null", 4);
        default: return parse_number(c, &kind, &ival, NULL);
    }
}

/* ---- timestamps --------------------------------------------------------------------------------------------- */

static inline int is_digit(unsigned char b) { return b >= '0' && b <= '9'; }

static long long days_from_civil(long long y, unsigned m, unsigned d) {
    y -= m <= 2;
    long long era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (long long)doe - 719468;
}

/* The canonical form YYYY-MM-DDTHH:MM:SS.mmmZ of a real instant (year 1 to 9999); its milliseconds since the
 * epoch in *ms. */
static int canonical_ts(span s, long long *ms) {
    static const int positions[] = {0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18, 20, 21, 22};
    const unsigned char *t = s.s;
    if (s.n != 24 || t[4] != '-' || t[7] != '-' || t[10] != 'T' || t[13] != ':' || t[16] != ':' || t[19] != '.'
        || t[23] != 'Z')
        return DOUBT;
    for (size_t i = 0; i < sizeof(positions) / sizeof(positions[0]); i++) {
        if (!is_digit(t[positions[i]])) return DOUBT;
    }
#define NUM2(i) ((t[i] - '0') * 10 + (t[(i) + 1] - '0'))
    int year = NUM2(0) * 100 + NUM2(2);
    int month = NUM2(5), day = NUM2(8), hour = NUM2(11), minute = NUM2(14), second = NUM2(17);
    int milli = (t[20] - '0') * 100 + NUM2(21);
#undef NUM2
    static const int month_days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (year < 1 || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return DOUBT;
    int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    int limit = month_days[month - 1] + (month == 2 && leap);
    if (day > limit) return DOUBT;
    long long days = days_from_civil(year, (unsigned)month, (unsigned)day);
    *ms = ((days * 24 + hour) * 60 + minute) * 60000LL + second * 1000LL + milli;
    return 0;
}

/* ---- one ledger line ---------------------------------------------------------------------------------------- */

typedef struct {
    span text[F_COUNT];
    int present[F_COUNT];
    int is_null[F_COUNT];
    double number[F_COUNT];
    int number_is_int[F_COUNT];
    long long integer[F_COUNT];
    int status;
    int correction;
    span synced_latest;
    int has_synced;
    span unsynced_name;
    int has_unsynced;
} line_fields;

static Py_ssize_t FIELD_LENGTHS[F_COUNT], ARTIFACT_LENGTHS[A_COUNT], STATUS_LENGTHS[STATUS_COUNT];

static inline int match_name(span key, const char **names, const Py_ssize_t *lengths, int count) {
    if (key.n == 0) return -1;
    for (int i = 0; i < count; i++) {
        if (key.n == lengths[i] && key.s[0] == (unsigned char)names[i][0]
            && memcmp(key.s, names[i], (size_t)key.n) == 0)
            return i;
    }
    return -1;
}

/* What one artifact of a line says. */
typedef struct {
    int seen[A_COUNT];
    span name, synced;
    int discarded, synced_set;
} artifact_fields;

static int artifact_member(cursor *c, span key, void *context) {
    artifact_fields *a = context;
    int which = match_name(key, ARTIFACT_NAMES, ARTIFACT_LENGTHS, A_COUNT);
    if (which >= 0) {
        if (a->seen[which]) return DOUBT;
        a->seen[which] = 1;
    }
    span s;
    int kind;
    long long ival, ms;
    switch (which) {
        case A_NAME:
            return parse_string(c, &a->name) < 0 || a->name.n == 0 ? DOUBT : 0;
        case A_URI:
        case A_REMOTE_PATH:
        case A_SHA256:
            return parse_string(c, &s);
        case A_SIZE:
            return parse_number(c, &kind, &ival, NULL) < 0 || kind != N_INT || ival < 0 ? DOUBT : 0;
        case A_SYNCED_AT:
            if (c->p < c->end && *c->p == 'n') return literal(c, "null", 4);
            a->synced_set = 1;
            return parse_string(c, &a->synced) < 0 || canonical_ts(a->synced, &ms) < 0 ? DOUBT : 0;
        case A_DISCARDED:
            if (c->p < c->end && *c->p == 't') {
                a->discarded = 1;
                return literal(c, "true", 4);
            }
            return literal(c, "false", 5);
        default:
            return skip_value(c, 3);
    }
}

/* One artifact: folded into the line's latest synced_at and its last unsynced artifact, as the Python pass does. */
static int parse_artifact(cursor *c, void *context) {
    line_fields *f = context;
    artifact_fields a;
    memset(&a, 0, sizeof(a));
    if (each_member(c, artifact_member, &a) < 0 || !a.seen[A_NAME]) return DOUBT;
    if (a.discarded) return 0;
    if (!a.synced_set) {
        f->unsynced_name = a.name;
        f->has_unsynced = 1;
    } else if (!f->has_synced || memcmp(a.synced.s, f->synced_latest.s, 24) > 0) {
        f->synced_latest = a.synced;
        f->has_synced = 1;
    }
    return 0;
}


/* null, or a value read by `read` */
static inline int maybe_null(cursor *c, line_fields *f, int which) {
    if (c->p < c->end && *c->p == 'n') {
        if (literal(c, "null", 4) < 0) return DOUBT;
        f->is_null[which] = 1;
        return 1;
    }
    return 0;
}

static int parse_field(cursor *c, line_fields *f, int which) {
    int kind, null;
    long long ival;
    double dval;
    long long ms;
    switch (which) {
        case F_ID:
        case F_DEPLOYMENT:
            return parse_string(c, &f->text[which]) < 0 || f->text[which].n == 0 ? DOUBT : 0;
        case F_STATUS: {
            span s;
            if (parse_string(c, &s) < 0) return DOUBT;
            f->status = match_name(s, STATUS_NAMES, STATUS_LENGTHS, STATUS_COUNT);
            return f->status < 0 ? DOUBT : 0;
        }
        case F_TS:
            return parse_string(c, &f->text[which]) < 0 || canonical_ts(f->text[which], &ms) < 0 ? DOUBT : 0;
        case F_PROVIDER:
        case F_REASON:
            return parse_string(c, &f->text[which]);
        case F_MODEL:
        case F_WORKFLOW:
        case F_GPU:
        case F_ERROR:
        case F_CAUSE:
        case F_HOST:
            null = maybe_null(c, f, which);
            if (null) return null < 0 ? DOUBT : 0;
            return parse_string(c, &f->text[which]);
        case F_STARTED:
        case F_COMPLETED:
            null = maybe_null(c, f, which);
            if (null) return null < 0 ? DOUBT : 0;
            if (parse_string(c, &f->text[which]) < 0 || canonical_ts(f->text[which], &ms) < 0) return DOUBT;
            f->integer[which] = ms;
            return 0;
        case F_WORKFLOW_VERSION:
        case F_PID:
        case F_ATTEMPT:
            if (which != F_ATTEMPT) {
                null = maybe_null(c, f, which);
                if (null) return null < 0 ? DOUBT : 0;
            }
            if (parse_number(c, &kind, &ival, NULL) < 0 || kind != N_INT) return DOUBT;
            return which != F_WORKFLOW_VERSION && ival < 1 ? DOUBT : 0;
        case F_DURATION:
        case F_COST:
            null = maybe_null(c, f, which);
            if (null) return null < 0 ? DOUBT : 0;
            if (parse_number(c, &kind, &ival, &dval) < 0 || dval < 0) return DOUBT;
            f->number[which] = dval;
            f->number_is_int[which] = kind == N_INT;
            f->integer[which] = ival;
            return 0;
        case F_INPUTS:
            null = maybe_null(c, f, which);
            if (null) return null < 0 ? DOUBT : 0;
            return each_member(c, skip_member, &(int){1});
        case F_ARTIFACTS:
            return each_element(c, parse_artifact, f);
        case F_CORRECTION:
            if (c->p < c->end && *c->p == 't') {
                f->correction = 1;
                return literal(c, "true", 4);
            }
            return literal(c, "false", 5);
        default:
            return skip_value(c, 1);
    }
}

static int line_member(cursor *c, span key, void *context) {
    line_fields *f = context;
    int which = match_name(key, FIELD_NAMES, FIELD_LENGTHS, F_COUNT);
    if (which >= 0) {
        if (f->present[which]) return DOUBT;
        f->present[which] = 1;
    }
    return parse_field(c, f, which < 0 ? F_COUNT : which);
}

static int parse_line(const unsigned char *start, const unsigned char *end, line_fields *f) {
    cursor c = {start, end};
    memset(f, 0, sizeof(*f));
    f->status = -1;
    skip_ws(&c);
    if (each_member(&c, line_member, f) < 0) return DOUBT;
    skip_ws(&c);
    if (c.p != c.end) return DOUBT;
    if (!f->present[F_ID] || !f->present[F_DEPLOYMENT] || !f->present[F_STATUS] || !f->present[F_TS]) return DOUBT;
    return 0;
}

/* ---- Python objects ----------------------------------------------------------------------------------------- */

static PyObject *text_or_none(line_fields *f, int which) {
    if (!f->present[which] || f->is_null[which]) Py_RETURN_NONE;
    return PyUnicode_FromStringAndSize((const char *)f->text[which].s, f->text[which].n);
}

/* One shared str per distinct value (deployments, providers, GPUs repeat on every line): the `strings` dict keeps
 * them across blocks; a small direct-mapped cache on the bytes spares the allocation of a value seen before. */
#define CACHE_SLOTS 64
typedef struct {
    PyObject *slot[CACHE_SLOTS]; /* borrowed from `strings` */
} string_cache;

static PyObject *shared(PyObject *strings, string_cache *cache, line_fields *f, int which) {
    if (!f->present[which] || f->is_null[which]) Py_RETURN_NONE;
    span s = f->text[which];
    uint32_t h = 2166136261u;
    for (Py_ssize_t i = 0; i < s.n; i++) h = (h ^ s.s[i]) * 16777619u;
    PyObject **slot = &cache->slot[h % CACHE_SLOTS];
    if (*slot != NULL) {
        Py_ssize_t n;
        const char *text = PyUnicode_AsUTF8AndSize(*slot, &n);
        if (text != NULL && n == s.n && memcmp(text, s.s, (size_t)n) == 0) {
            Py_INCREF(*slot);
            return *slot;
        }
        PyErr_Clear();
    }
    PyObject *value = PyUnicode_FromStringAndSize((const char *)s.s, s.n);
    if (value == NULL) return NULL;
    PyObject *kept = PyDict_SetDefault(strings, value, value);
    Py_DECREF(value);
    if (kept == NULL) return NULL;
    *slot = kept;
    Py_INCREF(kept);
    return kept;
}

static PyObject *number_or_none(line_fields *f, int which) {
    if (!f->present[which] || f->is_null[which]) Py_RETURN_NONE;
    if (f->number_is_int[which]) return PyLong_FromLongLong(f->integer[which]);
    return PyFloat_FromDouble(f->number[which]);
}

static uint32_t owner_hash(span id) {
    uint32_t h = 2166136261u;
    for (Py_ssize_t i = 0; i < id.n; i++) {
        h ^= id.s[i];
        h *= 16777619u;
    }
    return (uint32_t)(h * 0x9E3779B1u) >> 16;
}

/* (index, id, status, deployment_id, ts, started_at, completed_at, elapsed_s, duration_s, cost_usd, has_error,
 *  correction, has_reason, provider, gpu, latest synced_at, name of the last unsynced artifact) */
#define FIELDS_TUPLE 17

static PyObject *fields_tuple(Py_ssize_t index, line_fields *f, PyObject *strings, string_cache *cache) {
    PyObject *elapsed;
    int both = f->present[F_STARTED] && !f->is_null[F_STARTED] && f->present[F_COMPLETED]
               && !f->is_null[F_COMPLETED];
    if (both) {
        /* as timedelta.total_seconds(): the exact quotient, correctly rounded (milliseconds < 2**53 are exact as
         * doubles, and IEEE division rounds correctly; microseconds would not be exact past ~285 years) */
        elapsed = PyFloat_FromDouble((double)(f->integer[F_COMPLETED] - f->integer[F_STARTED]) / 1000.0);
    } else {
        elapsed = Py_None;
        Py_INCREF(elapsed);
    }
    PyObject *status = STATUS_OBJECTS[f->status];
    Py_INCREF(status);
    int has_error = f->present[F_ERROR] && !f->is_null[F_ERROR] && f->text[F_ERROR].n > 0;
    int has_reason = f->present[F_REASON] && f->text[F_REASON].n > 0;
    PyObject *synced = f->has_synced ? PyUnicode_FromStringAndSize((const char *)f->synced_latest.s, 24)
                                     : (Py_INCREF(Py_None), Py_None);
    PyObject *unsynced = f->has_unsynced ? PyUnicode_FromStringAndSize((const char *)f->unsynced_name.s,
                                                                       f->unsynced_name.n)
                                         : (Py_INCREF(Py_None), Py_None);
    PyObject *items[FIELDS_TUPLE] = {
        PyLong_FromSsize_t(index),
        text_or_none(f, F_ID),
        status,
        shared(strings, cache, f, F_DEPLOYMENT),
        text_or_none(f, F_TS),
        text_or_none(f, F_STARTED),
        text_or_none(f, F_COMPLETED),
        elapsed,
        number_or_none(f, F_DURATION),
        number_or_none(f, F_COST),
        PyBool_FromLong(has_error),
        PyBool_FromLong(f->correction),
        PyBool_FromLong(has_reason),
        shared(strings, cache, f, F_PROVIDER),
        shared(strings, cache, f, F_GPU),
        synced,
        unsynced,
    };
    PyObject *tuple = PyTuple_New(FIELDS_TUPLE);
    int failed = tuple == NULL;
    for (int i = 0; i < FIELDS_TUPLE; i++) {
        if (items[i] == NULL) failed = 1;
        if (tuple != NULL && items[i] != NULL) {
            PyTuple_SET_ITEM(tuple, i, items[i]);
        } else {
            Py_XDECREF(items[i]);
        }
    }
    if (failed) {
        Py_XDECREF(tuple);
        return NULL;
    }
    return tuple;
}

/* ---- blocks of lines ---------------------------------------------------------------------------------------- */

/* The list a block function returns, once its arguments are checked; NULL (buffer released, error set) if not. */
static PyObject *start_block(Py_buffer *buffer, Py_ssize_t cut, int valid, const char *problem) {
    if (!valid || cut < 0 || cut > buffer->len) {
        PyBuffer_Release(buffer);
        PyErr_SetString(PyExc_ValueError, problem);
        return NULL;
    }
    PyObject *list = PyList_New(0);
    if (list == NULL) PyBuffer_Release(buffer);
    return list;
}

/* The lines of data[:cut], one at a time: next_line gives [*start, *end) without the newline. */
typedef struct {
    const unsigned char *line;
    const unsigned char *stop;
} lines;

static inline int next_line(lines *it, const unsigned char **start, const unsigned char **end) {
    if (it->line == NULL || it->line >= it->stop) return 0;
    const unsigned char *nl = memchr(it->line, '\n', (size_t)(it->stop - it->line));
    *start = it->line;
    *end = nl ? nl : it->stop;
    it->line = nl ? nl + 1 : NULL;
    return 1;
}

static PyObject *scan_block(PyObject *self, PyObject *args) {
    Py_buffer buffer;
    Py_ssize_t cut, part, parts;
    PyObject *strings;
    if (!PyArg_ParseTuple(args, "y*nnnO!", &buffer, &cut, &part, &parts, &PyDict_Type, &strings)) return NULL;
    PyObject *entries = start_block(&buffer, cut, parts >= 1 && part >= 0 && part < parts, "bad cut or partition");
    if (entries == NULL) return NULL;
    lines it = {buffer.buf, (const unsigned char *)buffer.buf + cut};
    const unsigned char *line, *end;
    Py_ssize_t index = 0;
    line_fields f;
    string_cache cache;
    memset(&cache, 0, sizeof(cache));
    for (; next_line(&it, &line, &end); index++) {
        PyObject *entry = NULL;
        /* A line that starts {"id":"<id without quote or backslash>" is its id's owner's, decided before any
         * parsing: the other workers skip it, and its owner reports it if it is broken. */
        int decided = parts == 1;
        if (!decided && end - line > 7 && memcmp(line, "{\"id\":\"", 7) == 0) {
            const unsigned char *q = line + 7;
            while (q < end && *q != '"' && *q != '\\') q++;
            if (q < end && *q == '"' && q > line + 7) {
                span id = {line + 7, q - line - 7};
                if ((Py_ssize_t)(owner_hash(id) % (uint32_t)parts) != part) goto next;
                decided = 1;
            }
        }
        if (parse_line(line, end, &f) == 0) {
            if (decided || (Py_ssize_t)(owner_hash(f.text[F_ID]) % (uint32_t)parts) == part) {
                entry = fields_tuple(index, &f, strings, &cache);
                if (entry == NULL) goto fail;
            }
        } else {
            entry = Py_BuildValue("(ny#O)", index, (const char *)line, (Py_ssize_t)(end - line),
                                  decided ? Py_True : Py_False);
            if (entry == NULL) goto fail;
        }
        if (entry != NULL) {
            int appended = PyList_Append(entries, entry);
            Py_DECREF(entry);
            if (appended < 0) goto fail;
        }
    next:;
    }
    PyBuffer_Release(&buffer);
    PyObject *result = Py_BuildValue("(nN)", index, entries);
    return result;
fail:
    PyBuffer_Release(&buffer);
    Py_DECREF(entries);
    return NULL;
}

/* ---- the current line of each job ------------------------------------------------------------------------------ */

static PyObject *last_lines(PyObject *self, PyObject *args) {
    Py_buffer buffer;
    Py_ssize_t cut, base;
    PyObject *last, *wanted;
    if (!PyArg_ParseTuple(args, "y*nnO!O", &buffer, &cut, &base, &PyDict_Type, &last, &wanted)) return NULL;
    PyObject *doubts = start_block(&buffer, cut, wanted == Py_None || PyBytes_Check(wanted),
                                   "bad cut, or wanted is neither bytes nor None");
    if (doubts == NULL) return NULL;
    const unsigned char *data = buffer.buf;
    lines it = {data, data + cut};
    const unsigned char *line, *end;
    Py_ssize_t index = 0;
    line_fields f;
    for (; next_line(&it, &line, &end); index++) {
        Py_ssize_t start_at = base + (line - data), end_at = base + (end - data);
        if (parse_line(line, end, &f) == 0) {
            span id = f.text[F_ID];
            if (wanted == Py_None
                || (id.n == PyBytes_GET_SIZE(wanted) && memcmp(id.s, PyBytes_AS_STRING(wanted), (size_t)id.n) == 0)) {
                PyObject *key = PyUnicode_FromStringAndSize((const char *)id.s, id.n);
                PyObject *value = key ? Py_BuildValue("(nnO)", start_at, end_at, STATUS_OBJECTS[f.status]) : NULL;
                int stored = value ? PyDict_SetItem(last, key, value) : -1;
                Py_XDECREF(key);
                Py_XDECREF(value);
                if (stored < 0) goto fail;
            }
        } else {
            PyObject *entry = Py_BuildValue("(nnn)", index, start_at, end_at);
            if (entry == NULL || PyList_Append(doubts, entry) < 0) {
                Py_XDECREF(entry);
                goto fail;
            }
            Py_DECREF(entry);
        }
    }
    PyBuffer_Release(&buffer);
    return Py_BuildValue("(nN)", index, doubts);
fail:
    PyBuffer_Release(&buffer);
    Py_DECREF(doubts);
    return NULL;
}

/* ---- secret keywords ---------------------------------------------------------------------------------------- */

static PyObject *candidate_lines(PyObject *self, PyObject *args) {
    Py_buffer buffer;
    Py_ssize_t limit;
    PyObject *needles;
    if (!PyArg_ParseTuple(args, "y*nO!", &buffer, &limit, &PyTuple_Type, &needles)) return NULL;
    if (limit < 0 || limit > buffer.len) limit = buffer.len;
    Py_ssize_t count = PyTuple_GET_SIZE(needles);
    /* the (lowercased) first two bytes of some needle; a one-byte needle marks all of its pairs */
    static unsigned char starts[65536];
    memset(starts, 0, sizeof(starts));
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *needle = PyTuple_GET_ITEM(needles, i);
        if (!PyBytes_Check(needle) || PyBytes_GET_SIZE(needle) < 2) {
            PyBuffer_Release(&buffer);
            PyErr_SetString(PyExc_TypeError, "needles must be lowercase bytes of two or more");
            return NULL;
        }
        const unsigned char *n = (const unsigned char *)PyBytes_AS_STRING(needle);
        starts[(n[0] << 8) | n[1]] = 1;
    }
    PyObject *spans = PyList_New(0);
    if (spans == NULL) {
        PyBuffer_Release(&buffer);
        return NULL;
    }
    const unsigned char *data = buffer.buf;
    Py_ssize_t start = 0;
    while (start < limit) {
        const unsigned char *nl = memchr(data + start, '\n', (size_t)(limit - start));
        Py_ssize_t end = nl ? (Py_ssize_t)(nl - data) : limit;
        int hit = 0;
        for (Py_ssize_t i = start; i + 1 < end && !hit; i++) {
            if (!starts[(LOWER[data[i]] << 8) | LOWER[data[i + 1]]]) continue;
            for (Py_ssize_t k = 0; k < count && !hit; k++) {
                PyObject *needle = PyTuple_GET_ITEM(needles, k);
                const unsigned char *n = (const unsigned char *)PyBytes_AS_STRING(needle);
                Py_ssize_t len = PyBytes_GET_SIZE(needle);
                if (i + len > end) continue;
                Py_ssize_t j = 0;
                while (j < len && LOWER[data[i + j]] == n[j]) j++;
                if (j == len) hit = 1;
            }
        }
        if (hit) {
            PyObject *pair = Py_BuildValue("(nn)", start, end);
            if (pair == NULL || PyList_Append(spans, pair) < 0) {
                Py_XDECREF(pair);
                Py_DECREF(spans);
                PyBuffer_Release(&buffer);
                return NULL;
            }
            Py_DECREF(pair);
        }
        start = end + 1;
    }
    PyBuffer_Release(&buffer);
    return spans;
}

static PyMethodDef METHODS[] = {
    {"scan_block", scan_block, METH_VARARGS,
     "scan_block(data, cut, part, parts, strings) -> (lines, entries): for each line of data[:cut] that worker "
     "`part` of `parts` may own, in order: (index, bytes, decided) for a line the Python pass must decide (decided: "
     "its owner is known from its raw id), or the fields tuple of a proven line it owns."},
    {"candidate_lines", candidate_lines, METH_VARARGS,
     "candidate_lines(data, limit, needles) -> [(start, end)]: the lines of data[:limit] holding a needle "
     "(lowercase bytes), case-insensitively."},
    {"last_lines", last_lines, METH_VARARGS,
     "last_lines(data, cut, base, last, wanted) -> (lines, [(index, start, end)]): for each proven line of data[:cut] (of "
     "job `wanted`, bytes, or of any job when None), last[id] = (base + start, base + end, status) of the line "
     "without its newline; returns the lines the Python reader must decide."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_linescan", NULL, -1, METHODS};

PyMODINIT_FUNC PyInit__linescan(void) {
    for (int i = 0; i < F_COUNT; i++) FIELD_LENGTHS[i] = (Py_ssize_t)strlen(FIELD_NAMES[i]);
    for (int i = 0; i < A_COUNT; i++) ARTIFACT_LENGTHS[i] = (Py_ssize_t)strlen(ARTIFACT_NAMES[i]);
    for (int i = 0; i < STATUS_COUNT; i++) STATUS_LENGTHS[i] = (Py_ssize_t)strlen(STATUS_NAMES[i]);
    for (int c = 0; c < 256; c++) {
        LOWER[c] = (unsigned char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        PLAIN[c] = (unsigned char)(c >= 0x20 && c < 0x80 && c != '"' && c != '\\');
    }
    for (int i = 0; i < STATUS_COUNT; i++) {
        STATUS_OBJECTS[i] = PyUnicode_InternFromString(STATUS_NAMES[i]);
        if (STATUS_OBJECTS[i] == NULL) return NULL;
    }
    return PyModule_Create(&MODULE);
}
