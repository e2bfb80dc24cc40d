/* Optional C accelerator for the hot loops (see _wire.py and _publisher.py).
 *
 * scan() takes the run of MSG/HMSG messages at the start of a read buffer
 * and does what FastParser.parse's Python loop does for them: builds each
 * message of a sink's subscription and appends it to that sink's batch, and
 * calls plain handlers. It stops, returning the position, at anything else:
 * PING/PONG, INFO, a status message, an unregistered sid, an incomplete
 * message, or any control line it does not read exactly as the server
 * writes it (single spaces, plain digits). Python then takes that one item,
 * so the accelerator is never the only reader of a case.
 *
 * pub_batch() and puback() do the same for the async publisher's sends and
 * its acknowledgements (_publisher.py).
 *
 * Without a C compiler the package installs without this module and the
 * Python code does the same work.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <limits.h>
#include <string.h>

/* The slots WireMsg.__init__ sets, in this order. */
enum { S_SUBJECT, S_REPLY, S_DATA, S_HDR_RAW, S_CONN, S_HEADERS, S_ACKED, S_META, N_SLOTS };
static const char *const slot_names[N_SLOTS] = {
    "_subject", "_reply", "data", "_hdr_raw", "_conn", "_headers", "_acked", "_meta",
};

/* Where a message type keeps those slots. */
typedef struct {
    PyTypeObject *type; /* owned */
    Py_ssize_t off[N_SLOTS];
} wire_layout;

static wire_layout learned = {NULL, {0}}; /* the last type learned, so a scan need not look again */

/* Fill *out with where type t keeps the slots; 0 when it is not a plain slotted
 * type laid out for them (then its constructor is called instead). Each
 * descriptor must belong to t or a base of it, lie within t's instances and
 * name a slot of its own. */
static int learn_wire(PyTypeObject *t, wire_layout *out) {
    if (learned.type == t) {
        *out = learned;
        Py_INCREF(t);
        return 1;
    }
    if (t->tp_dictoffset != 0 || t->tp_itemsize != 0 || t->tp_alloc != PyType_GenericAlloc) {
        return 0;
    }
    Py_ssize_t off[N_SLOTS];
    for (int i = 0; i < N_SLOTS; i++) {
        PyObject *d = PyObject_GetAttrString((PyObject *)t, slot_names[i]);
        if (d == NULL) {
            PyErr_Clear();
            return 0;
        }
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type) && PyType_IsSubtype(t, PyDescr_TYPE(d));
        if (ok) {
            PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
            ok = m->type == T_OBJECT_EX && !(m->flags & READONLY) && m->offset >= (Py_ssize_t)sizeof(PyObject) &&
                 m->offset + (Py_ssize_t)sizeof(PyObject *) <= t->tp_basicsize;
            off[i] = m->offset;
        }
        Py_DECREF(d);
        for (int j = 0; ok && j < i; j++) {
            ok = off[j] != off[i];
        }
        if (!ok) {
            return 0;
        }
    }
    Py_INCREF(t);
    Py_XSETREF(learned.type, t);
    memcpy(learned.off, off, sizeof(off));
    *out = learned;
    Py_INCREF(t);
    return 1;
}

/* A message built as WireMsg.__init__ would, without running Python. Steals
 * nothing: every value gets a new reference. */
static PyObject *new_wire(const wire_layout *w, PyObject *subject, PyObject *reply, PyObject *data, PyObject *conn,
                          PyObject *hdr) {
    PyObject *o = w->type->tp_alloc(w->type, 0);
    if (o == NULL) {
        return NULL;
    }
    PyObject *vals[N_SLOTS] = {subject, reply, data, hdr, conn, Py_None, Py_False, Py_None};
    for (int i = 0; i < N_SLOTS; i++) {
        Py_INCREF(vals[i]);
        *(PyObject **)((char *)o + w->off[i]) = vals[i];
    }
    return o;
}

/* Plain ASCII digits, 1 to 15 of them (a size or sid the server writes). */
static int read_number(const char *p, Py_ssize_t len, long long *out) {
    if (len < 1 || len > 15) {
        return 0;
    }
    long long v = 0;
    for (Py_ssize_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return 0;
        }
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 1;
}

typedef struct {
    const char *p;
    Py_ssize_t len;
} token;

/* Split a control line on single spaces. 0 when any token is empty or holds
 * whitespace other than the separating spaces (Python's split() reads those). */
static int split_line(const char *p, Py_ssize_t len, token *toks, int max, int *ntok) {
    int n = 0;
    Py_ssize_t start = 0;
    for (Py_ssize_t i = 0; i <= len; i++) {
        char c = i < len ? p[i] : ' ';
        if (c == ' ') {
            if (i == start || n == max) {
                return 0;
            }
            toks[n].p = p + start;
            toks[n].len = i - start;
            n++;
            start = i + 1;
        } else if (c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') {
            return 0;
        }
    }
    *ntok = n;
    return 1;
}

/* The exception being raised, taken (the error indicator is cleared). */
static PyObject *take_exception(void) {
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    if (tb != NULL && exc != NULL) {
        PyException_SetTraceback(exc, tb);
    }
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return exc;
#endif
}

/* Report a handler's exception through log_fn(exc) and go on. */
static void report(PyObject *log_fn) {
    PyObject *exc = take_exception();
    PyObject *r = PyObject_CallOneArg(log_fn, exc != NULL ? exc : Py_None);
    if (r == NULL) {
        PyErr_WriteUnraisable(log_fn);
    }
    Py_XDECREF(r);
    Py_XDECREF(exc);
}

typedef struct {
    const char *sid;  /* the sid bytes of the cached lookup, in the buffer */
    Py_ssize_t sid_len;
    PyObject *sink, *make, *conn, *batch, *handler; /* owned */
    PyObject *subject;                              /* the last subject made, reused while equal */
} cache;

static void cache_clear(cache *c) {
    Py_CLEAR(c->sink);
    Py_CLEAR(c->make);
    Py_CLEAR(c->conn);
    Py_CLEAR(c->batch);
    Py_CLEAR(c->handler);
    c->sid = NULL;
    c->sid_len = 0;
}

/* Look up a sid: 1 found (sink or handler cached), 0 not ours, -1 error. */
static int lookup(cache *c, const token *sid_tok, long long sid, PyObject *sinks, PyObject *handlers, PyObject *batches) {
    cache_clear(c);
    PyObject *key = PyLong_FromLongLong(sid);
    if (key == NULL) {
        return -1;
    }
    PyObject *sink = PyDict_GetItemWithError(sinks, key);
    if (sink != NULL) {
        Py_DECREF(key);
        c->sink = Py_NewRef(sink);
        c->make = PyObject_GetAttrString(sink, "make");
        c->conn = c->make != NULL ? PyObject_GetAttrString(sink, "conn") : NULL;
        if (c->conn == NULL) {
            return -1;
        }
        PyObject *batch = PyDict_GetItemWithError(batches, sink);
        if (batch == NULL) {
            if (PyErr_Occurred()) {
                return -1;
            }
            batch = PyList_New(0);
            if (batch == NULL || PyDict_SetItem(batches, sink, batch) < 0) {
                Py_XDECREF(batch);
                return -1;
            }
            c->batch = batch;
        } else {
            c->batch = Py_NewRef(batch);
        }
        if (!PyList_CheckExact(c->batch)) {
            PyErr_SetString(PyExc_TypeError, "a sink's batch must be a list");
            return -1;
        }
    } else if (PyErr_Occurred()) {
        Py_DECREF(key);
        return -1;
    } else {
        PyObject *handler = PyDict_GetItemWithError(handlers, key);
        Py_DECREF(key);
        if (handler == NULL) {
            return PyErr_Occurred() ? -1 : 0;
        }
        c->handler = Py_NewRef(handler);
    }
    c->sid = sid_tok->p;
    c->sid_len = sid_tok->len;
    return 1;
}

static const char STATUS_LINE[] = "NATS/1.0 ";

/* scan(buf, pos, sinks, handlers, batches, wire_type, log_fn) -> (pos, count, payload bytes)
 *
 * buf: the read buffer (any bytes-like object), pos: where to start.
 * sinks / handlers: dicts of sid -> sink / handler, as FastParser has them.
 * batches: dict of sink -> list, appended to as FastParser's loop does.
 * wire_type: the message type sinks' make may name (built directly).
 * log_fn(exc): called when a handler raised. */
static PyObject *scan(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "scan() takes 7 arguments");
        return NULL;
    }
    PyObject *sinks = args[2], *handlers = args[3], *batches = args[4], *log_fn = args[6];
    if (!PyDict_Check(sinks) || !PyDict_Check(handlers) || !PyDict_Check(batches)) {
        PyErr_SetString(PyExc_TypeError, "sinks, handlers and batches must be dicts");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred()) {
        return NULL;
    }
    /* The layout is this scan's own copy: a handler that scans with another
     * type meanwhile cannot change how this one builds its messages. */
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    wire_layout layout = {NULL, {0}};
    int fast_wire = PyType_Check(args[5]) && learn_wire((PyTypeObject *)args[5], &layout);
    PyObject *wt = args[5];
    const char *b = (const char *)view.buf;
    const Py_ssize_t n = view.len;
    long long count = 0, size_in = 0;
    cache c = {0};
    int failed = 0;
    if (pos < 0) {
        pos = n;  /* nothing to do */
    }

    while (pos < n) {
        const char *p = b + pos;
        const char *nl = memchr(p, '\n', (size_t)(n - pos));
        if (nl == NULL || nl == p || nl[-1] != '\r') {
            break;  /* an incomplete or unusual line: Python's */
        }
        Py_ssize_t line_len = nl - 1 - p;
        token t[6];
        int ntok;
        if (!split_line(p, line_len, t, 6, &ntok)) {
            break;
        }
        int hmsg;
        if (t[0].len == 3 && memcmp(t[0].p, "MSG", 3) == 0 && (ntok == 4 || ntok == 5)) {
            hmsg = 0;
        } else if (t[0].len == 4 && memcmp(t[0].p, "HMSG", 4) == 0 && (ntok == 5 || ntok == 6)) {
            hmsg = 1;
        } else {
            break;
        }
        int with_reply = ntok == 5 + hmsg;
        const token *subj = &t[1], *sid_t = &t[2];
        const token *reply_t = with_reply ? &t[3] : NULL;
        long long sid, size, hsize = 0;
        if (!read_number(sid_t->p, sid_t->len, &sid) || !read_number(t[ntok - 1].p, t[ntok - 1].len, &size)) {
            break;
        }
        if (hmsg && (!read_number(t[ntok - 2].p, t[ntok - 2].len, &hsize) || hsize > size)) {
            break;
        }
        Py_ssize_t start = pos + line_len + 2;
        if (start + size + 2 > n) {
            break;  /* the payload is not all here: Python counts what it needs */
        }
        const char *payload = b + start;
        if (hsize && !with_reply && size == hsize && size >= 9 && memcmp(payload, STATUS_LINE, 9) == 0) {
            break;  /* a status: Python hands over what came before it */
        }
        if (c.sid == NULL || c.sid_len != sid_t->len || memcmp(c.sid, sid_t->p, (size_t)sid_t->len) != 0) {
            int found = lookup(&c, sid_t, sid, sinks, handlers, batches);
            if (found < 0) {
                failed = 1;
                break;
            }
            if (found == 0) {
                break;  /* not registered here: nats-py's */
            }
        }
        /* The subject: consecutive messages often share it. */
        PyObject *subject = c.subject;
        if (subject == NULL || PyBytes_GET_SIZE(subject) != subj->len ||
            memcmp(PyBytes_AS_STRING(subject), subj->p, (size_t)subj->len) != 0) {
            subject = PyBytes_FromStringAndSize(subj->p, subj->len);
            if (subject == NULL) {
                failed = 1;
                break;
            }
            Py_XSETREF(c.subject, subject);
        }
        PyObject *reply = reply_t ? PyBytes_FromStringAndSize(reply_t->p, reply_t->len) : PyBytes_FromStringAndSize(NULL, 0);
        PyObject *data = PyBytes_FromStringAndSize(payload + hsize, (Py_ssize_t)(size - hsize));
        PyObject *hdr = hsize ? PyBytes_FromStringAndSize(payload, (Py_ssize_t)hsize) : Py_NewRef(Py_None);
        if (reply == NULL || data == NULL || hdr == NULL) {
            Py_XDECREF(reply);
            Py_XDECREF(data);
            Py_XDECREF(hdr);
            failed = 1;
            break;
        }
        if (c.sink != NULL) {
            PyObject *msg;
            if (fast_wire && c.make == wt) {
                msg = new_wire(&layout, subject, reply, data, c.conn, hdr);
            } else {
                PyObject *call_args[5] = {subject, reply, data, c.conn, hdr};
                msg = PyObject_Vectorcall(c.make, call_args, 5, NULL);
            }
            int rc = msg != NULL ? PyList_Append(c.batch, msg) : -1;
            Py_XDECREF(msg);
            Py_DECREF(reply);
            Py_DECREF(data);
            Py_DECREF(hdr);
            if (rc < 0) {
                failed = 1;
                break;
            }
        } else {
            PyObject *call_args[4] = {subject, reply, data, hdr};
            PyObject *r = PyObject_Vectorcall(c.handler, call_args, 4, NULL);
            Py_DECREF(reply);
            Py_DECREF(data);
            Py_DECREF(hdr);
            if (r == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_Exception)) {
                    failed = 1;  /* KeyboardInterrupt, SystemExit, CancelledError: as the Python loop, end here */
                    break;
                }
                report(log_fn);  /* never let a handler end the read loop */
            }
            Py_XDECREF(r);
        }
        count++;
        size_in += size - hsize;  /* payload bytes, as nats-py counts them */
        pos = start + size + 2;
    }

    cache_clear(&c);
    Py_CLEAR(c.subject);
    Py_XDECREF(layout.type);
    PyBuffer_Release(&view);
    if (failed) {
        return NULL;
    }
    return Py_BuildValue("(nLL)", pos, count, size_in);
}


/* -- publishing ------------------------------------------------------------ */

typedef struct {
    char *buf;
    Py_ssize_t len, cap;
} outbuf;

static int out_reserve(outbuf *o, Py_ssize_t more) {
    if (more > PY_SSIZE_T_MAX / 2 - o->len) {
        PyErr_NoMemory();
        return -1;
    }
    if (o->len + more <= o->cap) {
        return 0;
    }
    Py_ssize_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + more) {
        cap *= 2;
    }
    char *b = PyMem_Realloc(o->buf, (size_t)cap);
    if (b == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->buf = b;
    o->cap = cap;
    return 0;
}

static void out_put(outbuf *o, const char *p, Py_ssize_t n) {
    memcpy(o->buf + o->len, p, (size_t)n);
    o->len += n;
}

static PyObject *str_subject, *str_data, *str_hdr, *str_popleft;

/* One queued publish as a PUB/HPUB line with reply prefix + token, filed in
 * inflight under the token. 0, or -1 with an exception and nothing filed or
 * written. */
static int put_publish(outbuf *o, PyObject *entry, const char *prefix, Py_ssize_t prefix_len, long long *next_id,
                       PyObject *inflight, long long *size) {
    int rc = -1;
    PyObject *subject = PyObject_GetAttr(entry, str_subject);
    PyObject *data = subject ? PyObject_GetAttr(entry, str_data) : NULL;
    PyObject *hdr = data ? PyObject_GetAttr(entry, str_hdr) : NULL;
    if (hdr == NULL) {
        goto out;
    }
    if (!PyUnicode_Check(subject) || !PyBytes_Check(data) || !PyBytes_Check(hdr)) {
        PyErr_SetString(PyExc_TypeError, "a queued publish needs subject str, data and hdr bytes");
        goto out;
    }
    Py_ssize_t subj_len;
    const char *subj = PyUnicode_AsUTF8AndSize(subject, &subj_len);
    if (subj == NULL) {
        goto out;
    }
    if (*next_id == LLONG_MAX) {
        PyErr_SetString(PyExc_OverflowError, "publish reply tokens exhausted");
        goto out;
    }
    char token[24];
    int token_len = snprintf(token, sizeof token, "%lld", *next_id + 1);
    Py_ssize_t dlen = PyBytes_GET_SIZE(data), hlen = PyBytes_GET_SIZE(hdr);
    char sizes[64];
    int sizes_len = hlen ? snprintf(sizes, sizeof sizes, " %zd %zd\r\n", hlen, hlen + dlen)
                         : snprintf(sizes, sizeof sizes, " %zd\r\n", dlen);
    /* Room first, then the filing: a failure leaves neither behind. */
    if (out_reserve(o, 5 + subj_len + 1 + prefix_len + token_len + sizes_len + hlen + dlen + 2) < 0) {
        goto out;
    }
    PyObject *key = PyBytes_FromStringAndSize(token, token_len);
    if (key == NULL || PyDict_SetItem(inflight, key, entry) < 0) {
        Py_XDECREF(key);
        goto out;
    }
    Py_DECREF(key);
    (*next_id)++;
    if (hlen) {
        out_put(o, "HPUB ", 5);
    } else {
        out_put(o, "PUB ", 4);
    }
    out_put(o, subj, subj_len);
    out_put(o, " ", 1);
    out_put(o, prefix, prefix_len);
    out_put(o, token, token_len);
    out_put(o, sizes, sizes_len);
    out_put(o, PyBytes_AS_STRING(hdr), hlen);
    out_put(o, PyBytes_AS_STRING(data), dlen);
    out_put(o, "\r\n", 2);
    *size += dlen;
    rc = 0;
out:
    Py_XDECREF(subject);
    Py_XDECREF(data);
    Py_XDECREF(hdr);
    return rc;
}

/* pub_batch(queue, prefix, next_id, inflight) -> (commands, count, size, next_id, failed)
 *
 * Takes the queued publishes (objects with ._subject str, ._data bytes,
 * ._hdr bytes) off the deque in order, gives each the reply prefix + its id
 * (next_id + 1, + 2, ...), files it in inflight under that token, and
 * returns the PUB / HPUB lines of all of them as one bytes object. failed is
 * None, or (entry, exception) for the publish it could not take (taken off the
 * queue, not filed, not written): it stops there and returns what it made, so
 * the caller sends that, fails the one and calls again for the rest. */
static PyObject *pub_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyBytes_Check(args[1]) || !PyDict_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "pub_batch(queue, prefix: bytes, next_id: int, inflight: dict)");
        return NULL;
    }
    PyObject *queue = args[0], *inflight = args[3];
    const char *prefix = PyBytes_AS_STRING(args[1]);
    Py_ssize_t prefix_len = PyBytes_GET_SIZE(args[1]);
    long long next_id = PyLong_AsLongLong(args[2]);
    if (next_id == -1 && PyErr_Occurred()) {
        return NULL;
    }
    outbuf o = {NULL, 0, 0};
    long long count = 0, size = 0;
    PyObject *failed = NULL;
    for (;;) {
        Py_ssize_t left = PyObject_Length(queue); /* looked at each time: the queue is shared */
        PyObject *entry = left > 0 ? PyObject_CallMethodNoArgs(queue, str_popleft) : NULL;
        if (entry == NULL) {
            if (left == 0) {
                break;
            }
            PyObject *exc = take_exception();
            failed = Py_BuildValue("(ON)", Py_None, exc != NULL ? exc : Py_NewRef(Py_None));
            break;
        }
        if (put_publish(&o, entry, prefix, prefix_len, &next_id, inflight, &size) < 0) {
            PyObject *exc = take_exception();
            failed = Py_BuildValue("(NN)", entry, exc != NULL ? exc : Py_NewRef(Py_None));
            break;
        }
        Py_DECREF(entry);
        count++;
    }
    PyObject *commands = PyBytes_FromStringAndSize(o.buf ? o.buf : "", o.len);
    PyMem_Free(o.buf);
    if (commands == NULL) {
        Py_XDECREF(failed);
        return NULL;
    }
    return Py_BuildValue("(NLLLN)", commands, count, size, next_id, failed != NULL ? failed : Py_NewRef(Py_None));
}

static int is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* puback(data) -> (stream: bytes, seq: int) for the plain acknowledgement
 * {"stream":"<name>","seq":<digits>} (spaces allowed after the comma and at
 * the end, as the server's encoder may write them), else None. */
static PyObject *puback(PyObject *module, PyObject *data) {
    if (!PyBytes_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "puback() takes bytes");
        return NULL;
    }
    const char *p = PyBytes_AS_STRING(data);
    Py_ssize_t n = PyBytes_GET_SIZE(data), i = 11;
    if (n < 11 || memcmp(p, "{\"stream\":\"", 11) != 0) {
        Py_RETURN_NONE;
    }
    Py_ssize_t name = i;
    while (i < n && p[i] != '"' && p[i] != '\\') {
        i++;
    }
    Py_ssize_t name_len = i - name;
    if (name_len == 0 || i + 2 > n || p[i] != '"' || p[i + 1] != ',') {
        Py_RETURN_NONE;
    }
    i += 2;
    while (i < n && is_json_space(p[i])) {
        i++;
    }
    if (n - i < 6 || memcmp(p + i, "\"seq\":", 6) != 0) {
        Py_RETURN_NONE;
    }
    i += 6;
    long long seq = 0;
    while (i + 1 < n && p[i] == '0' && p[i + 1] >= '0' && p[i + 1] <= '9') {
        i++; /* leading zeros: the value is what counts */
    }
    Py_ssize_t digits = i;
    while (i < n && p[i] >= '0' && p[i] <= '9' && i - digits < 18) {
        seq = seq * 10 + (p[i] - '0');
        i++;
    }
    if (i == digits || i >= n || p[i] != '}') {
        Py_RETURN_NONE;  /* no digits, more than 18 of them, or something else follows */
    }
    for (i++; i < n; i++) {
        if (!is_json_space(p[i])) {
            Py_RETURN_NONE;
        }
    }
    return Py_BuildValue("(y#L)", p + name, name_len, seq);
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL, "Parse the run of MSG/HMSG messages at pos (see the module source)."},
    {"pub_batch", (PyCFunction)(void (*)(void))pub_batch, METH_FASTCALL, "Every queued publish as PUB/HPUB lines (see the module source)."},
    {"puback", (PyCFunction)puback, METH_O, "(stream, seq) of a plain PubAck, else None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "jetstream_sync._core._speedups", "Optional C accelerator for the protocol parser.", -1, methods,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    str_subject = PyUnicode_InternFromString("_subject");
    str_data = PyUnicode_InternFromString("_data");
    str_hdr = PyUnicode_InternFromString("_hdr");
    str_popleft = PyUnicode_InternFromString("popleft");
    if (str_subject == NULL || str_data == NULL || str_hdr == NULL || str_popleft == NULL) {
        return NULL;
    }
    return PyModule_Create(&module);
}
