/* The record walk of protocol/validation.py in C: the produce path runs it for every record.
 *
 * scan(body, count, compact, check_time, base_ts, lowest, highest, max_errors)
 *   -> (error, error_index, keyless, bad_timestamps, max_timestamp_delta)
 * error is None or a message for the first structural error (and error_index the record it is
 * in); keyless lists the indexes of records without key (only when compact), bad_timestamps the
 * indexes of records whose CreateTime is outside [lowest, highest] (only when check_time).
 * Both lists stop at `max_errors` entries.  max_timestamp_delta is the largest record
 * timestamp delta (Kafka writes base timestamp + it into the batch header).  The Python version in validation.py is the
 * reference; tests run the two on the same inputs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct {
    const unsigned char *p;
    Py_ssize_t pos;
    Py_ssize_t end;
} Cursor;

/* Zigzag varint of at most max_bytes bytes; returns 0 on success, -1 when truncated or too long. */
static int read_varint(Cursor *c, int max_bytes, int64_t *out) {
    uint64_t raw = 0;
    int shift = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (c->pos >= c->end) return -1;
        unsigned char b = c->p[c->pos++];
        raw |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            return 0;
        }
        shift += 7;
    }
    return -1;
}

static PyObject *fail(const char *message, Py_ssize_t index, PyObject *keyless, PyObject *bad_ts) {
    return Py_BuildValue("(snNNL)", message, index, keyless, bad_ts, 0LL);
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count, max_errors;
    int compact, check_time;
    long long base_ts, lowest, highest;
    if (!PyArg_ParseTuple(args, "y*nppLLLn", &view, &count, &compact, &check_time, &base_ts, &lowest,
                          &highest, &max_errors))
        return NULL;
    PyObject *keyless = PyList_New(0);
    PyObject *bad_ts = PyList_New(0);
    PyObject *result = NULL;
    if (keyless == NULL || bad_ts == NULL) goto error;
    Cursor c = {(const unsigned char *)view.buf, 0, view.len};
    Py_ssize_t errors = 0;
    Py_ssize_t index = 0;
    int64_t max_delta = INT64_MIN;
    for (index = 0; index < count; index++) {
        int64_t length, ts_delta, offset_delta, n, headers;
        if (read_varint(&c, 5, &length) < 0) { result = fail("bad record length", index, keyless, bad_ts); goto done; }
        /* 6: attributes, timestamp delta, offset delta, key length, value length and header count,
         * one byte each (null or empty key and value, no headers) is the smallest record. */
        if (length < 6 || length > c.end - c.pos) { result = fail("invalid record size", index, keyless, bad_ts); goto done; }
        Py_ssize_t record_end = c.pos + (Py_ssize_t)length;
        c.end = record_end;  /* every field must stay inside its record */
        c.pos += 1;          /* attributes */
        if (read_varint(&c, 10, &ts_delta) < 0 || read_varint(&c, 5, &offset_delta) < 0) {
            result = fail("bad record header", index, keyless, bad_ts); goto done;
        }
        if (ts_delta > max_delta) max_delta = ts_delta;
        if (offset_delta != index) { result = fail("record offset delta is not the record's index", index, keyless, bad_ts); goto done; }
        /* A negative length other than -1 is read as null, as Kafka's DefaultRecord does. */
        if (read_varint(&c, 5, &n) < 0 || n > c.end - c.pos) { result = fail("invalid key length", index, keyless, bad_ts); goto done; }
        if (n >= 0) c.pos += (Py_ssize_t)n;
        else if (compact && errors < max_errors) {
            PyObject *i = PyLong_FromSsize_t(index);
            if (i == NULL || PyList_Append(keyless, i) < 0) { Py_XDECREF(i); goto error; }
            Py_DECREF(i);
            errors++;
        }
        if (read_varint(&c, 5, &n) < 0 || n > c.end - c.pos) { result = fail("invalid value length", index, keyless, bad_ts); goto done; }
        if (n > 0) c.pos += (Py_ssize_t)n;
        if (read_varint(&c, 5, &headers) < 0 || headers < 0 || headers > c.end - c.pos) {
            result = fail("invalid header count", index, keyless, bad_ts); goto done;
        }
        for (int64_t h = 0; h < headers; h++) {
            /* Kafka keeps header keys as bytes and decodes them when asked (malformed UTF-8 becomes
             * U+FFFD), so a key that is not UTF-8 is stored; only a negative key length is refused. */
            if (read_varint(&c, 5, &n) < 0 || n < 0 || n > c.end - c.pos) { result = fail("invalid header key", index, keyless, bad_ts); goto done; }
            c.pos += (Py_ssize_t)n;
            if (read_varint(&c, 5, &n) < 0 || n > c.end - c.pos) { result = fail("invalid header value", index, keyless, bad_ts); goto done; }
            if (n > 0) c.pos += (Py_ssize_t)n;
        }
        if (c.pos != record_end) { result = fail("record size does not match its fields", index, keyless, bad_ts); goto done; }
        c.end = view.len;
        if (check_time) {
            long long ts = (long long)((uint64_t)base_ts + (uint64_t)ts_delta);  /* wraps, as Java's does */
            /* -1 is "no timestamp": Kafka does not check it. */
            if ((ts < lowest || ts > highest) && ts != -1 && errors < max_errors) {
                PyObject *i = PyLong_FromSsize_t(index);
                if (i == NULL || PyList_Append(bad_ts, i) < 0) { Py_XDECREF(i); goto error; }
                Py_DECREF(i);
                errors++;
            }
        }
    }
    if (c.pos != view.len) { result = fail("bytes after the last record", count, keyless, bad_ts); goto done; }
    result = Py_BuildValue("(OnNNL)", Py_None, (Py_ssize_t)-1, keyless, bad_ts, (long long)max_delta);
    goto done;
error:
    Py_XDECREF(keyless);
    Py_XDECREF(bad_ts);
done:
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "Walk the records of a decompressed v2 batch body once."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_validate", NULL, -1, methods};

PyMODINIT_FUNC PyInit__validate(void) { return PyModule_Create(&module); }
