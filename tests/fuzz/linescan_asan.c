/* Memory-safety fuzzing of the compiled scanner: mutated ledger lines through parse_line (exact-size buffers, so
 * AddressSanitizer sees any read past a line) and the module functions. Built and run by tests/test_linescan_asan.py:
 *   gcc -fsanitize=address,undefined -I src/gpuharness tests/fuzz/linescan_asan.c $(python3-config --includes)
 *       $(python3-config --ldflags --embed) -o linescan_asan && ./linescan_asan SEEDS.jsonl ITERATIONS
 */
#include "_linescan.c"
#include <stdio.h>
#include <stdlib.h>

static const char *TOKENS[] = {",", "}", "]", "{", "[", "\"", "\\", " ", "\t", "\r", "\xff", "\xc3", "\xed\xa0\x80",
    "\xf4\x90\x80\x80", "\xe0\x80", "NaN", "1e999", "-", "0", "00", ".", "e", "E+", "true", "false", "null", "nul",
    "\"id\":\"J-x\",", "\"status\":\"failed\",", "\"ts\":\"2026-02-29T00:00:00.000Z\",", "\"artifacts\":[{\"name\":\"a\"}],",
    "\"artifacts\":[{},", "\"inputs\":{\"a\":[[[[", "\"cost_usd\":", "\"synced_at\":\"", ":"};

int main(int argc, char **argv) {
    Py_Initialize();
    PyObject *module = PyInit__linescan();
    if (!module) { PyErr_Print(); return 1; }
    FILE *in = fopen(argv[1], "rb");
    static char seedbuf[1 << 22];
    size_t total = fread(seedbuf, 1, sizeof(seedbuf) - 1, in);
    fclose(in);
    char *lines[4096]; size_t lens[4096]; int count = 0;
    char *p = seedbuf, *end = seedbuf + total;
    while (p < end && count < 4096) { char *nl = memchr(p, '\n', end - p); if (!nl) break; lines[count] = p; lens[count] = nl - p; count++; p = nl + 1; }
    long iterations = atol(argv[2]);
    srand(12345);
    PyObject *strings = PyDict_New();
    PyObject *scan = PyObject_GetAttrString(module, "scan_block");
    PyObject *last = PyObject_GetAttrString(module, "last_lines");
    PyObject *cand = PyObject_GetAttrString(module, "candidate_lines");
    PyObject *needles = Py_BuildValue("(y#y#y#y#)", "rpa_", 4, "private key", 11, "bearer", 6, "pass", 4);
    long proven = 0;
    for (long it = 0; it < iterations; it++) {
        int k = rand() % count;
        size_t n = lens[k];
        size_t cap = n + 256;
        unsigned char *buf = malloc(cap);
        memcpy(buf, lines[k], n);
        int edits = rand() % 5;
        for (int e = 0; e < edits; e++) {
            size_t at = n ? (size_t)rand() % (n + 1) : 0;
            int op = rand() % 4;
            const char *tok = TOKENS[rand() % (sizeof(TOKENS) / sizeof(TOKENS[0]))];
            size_t tl = strlen(tok);
            unsigned char rnd = (unsigned char)(rand() & 0xff);
            if (op == 3) { tok = (const char *)&rnd; tl = 1; }
            if (op == 0 || op == 3) { if (n + tl >= cap) continue; memmove(buf + at + tl, buf + at, n - at); memcpy(buf + at, tok, tl); n += tl; }
            else if (op == 1) { size_t d = (size_t)rand() % 8; if (at + d > n) d = n - at; memmove(buf + at, buf + at + d, n - at - d); n -= d; }
            else { n = at; }
        }
        /* exact-size copy so that any read past the end is caught */
        unsigned char *exact = malloc(n ? n : 1);
        memcpy(exact, buf, n);
        free(buf);
        line_fields f;
        if (parse_line(exact, exact + n, &f) == 0) {
            proven++;
            string_cache cache; memset(&cache, 0, sizeof(cache));
            PyObject *t = fields_tuple(0, &f, strings, &cache);
            if (!t) { PyErr_Print(); return 2; }
            Py_DECREF(t);
        }
        if (it % 16 == 0) {
            PyObject *block = PyBytes_FromStringAndSize((const char *)exact, n);
            PyObject *r1 = PyObject_CallFunction(scan, "Onnn O", block, (Py_ssize_t)n, (Py_ssize_t)(it % 3), (Py_ssize_t)3, strings);
            PyObject *found = PyDict_New();
            PyObject *r2 = PyObject_CallFunction(last, "OnnOO", block, (Py_ssize_t)n, (Py_ssize_t)0, found, Py_None);
            PyObject *r3 = PyObject_CallFunction(cand, "OnO", block, (Py_ssize_t)n, needles);
            if (!r1 || !r2 || !r3) { PyErr_Print(); return 3; }
            Py_DECREF(r1); Py_DECREF(r2); Py_DECREF(r3); Py_DECREF(found); Py_DECREF(block);
        }
        free(exact);
    }
    printf("iterations %ld proven %ld\n", iterations, proven);
    Py_Finalize();
    return 0;
}
