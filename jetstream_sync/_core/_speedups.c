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
 * its acknowledgements (_publisher.py), ack_batch() for the outbox's sends
 * of acks and core publishes (_outbox.py).
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

/* The async publisher's reply router (below): scan() resolves its plain
 * acknowledgements itself. */
static PyTypeObject RouterType;
static int route_ack(PyObject *router, const char *subj, Py_ssize_t subj_len, const char *payload, Py_ssize_t size);

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
        if (c.handler != NULL && hsize == 0 && Py_IS_TYPE(c.handler, &RouterType)) {
            int routed = route_ack(c.handler, subj->p, subj->len, payload, (Py_ssize_t)size);
            if (routed < 0) {
                if (!PyErr_ExceptionMatches(PyExc_Exception)) {
                    failed = 1;
                    break;
                }
                report(log_fn);
            }
            if (routed != 0) {
                count++;
                size_in += size;
                pos = start + size + 2;
                continue;
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

/* The growable buffer as a bytes object (NULL with an exception); the buffer is freed either way. */
static PyObject *out_bytes(outbuf *o) {
    PyObject *b = PyBytes_FromStringAndSize(o->buf != NULL ? o->buf : "", o->len);
    PyMem_Free(o->buf);
    o->buf = NULL;
    return b;
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
    PyObject *commands = out_bytes(&o);
    if (commands == NULL) {
        Py_XDECREF(failed);
        return NULL;
    }
    return Py_BuildValue("(NLLLN)", commands, count, size, next_id, failed != NULL ? failed : Py_NewRef(Py_None));
}

/* ack_batch(queue) -> (commands, count, size, published, last)
 *
 * What AckOutbox._send's Python loop makes (_outbox.py), for everything on the
 * deque, in order, as one bytes object: an ack (subject bytes or str, payload
 * bytes) as "PUB <subject> <len>\r\n<payload>\r\n"; a core publish (its
 * command bytes, formatted by its caller, and an int) as is. count: items;
 * size: the acks' payload bytes plus the publishes' ints; published: the
 * publishes' command bytes (their share of pending_size); last: the last ack
 * item, or None. An item of another shape raises TypeError, as the Python
 * loop would, with what came before it taken off the queue. */
static PyObject *ack_batch(PyObject *module, PyObject *queue) {
    outbuf o = {NULL, 0, 0};
    long long count = 0, size = 0, published = 0;
    PyObject *last = NULL, *commands;
    for (;;) {
        Py_ssize_t left = PyObject_Length(queue);
        if (left <= 0) {
            if (left < 0) {
                goto fail;
            }
            break;
        }
        PyObject *item = PyObject_CallMethodNoArgs(queue, str_popleft);
        if (item == NULL) {
            goto fail;
        }
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2) {
            Py_DECREF(item);
            PyErr_SetString(PyExc_TypeError, "a queued ack or publish must be a (subject, payload) tuple");
            goto fail;
        }
        PyObject *subject = PyTuple_GET_ITEM(item, 0), *payload = PyTuple_GET_ITEM(item, 1);
        if (PyLong_CheckExact(payload)) { /* a core publish */
            long long share = PyLong_AsLongLong(payload);
            if ((share == -1 && PyErr_Occurred()) || !PyBytes_Check(subject)) {
                Py_DECREF(item);
                if (!PyErr_Occurred()) {
                    PyErr_SetString(PyExc_TypeError, "a queued publish's command must be bytes");
                }
                goto fail;
            }
            Py_ssize_t len = PyBytes_GET_SIZE(subject);
            if (out_reserve(&o, len) < 0) {
                Py_DECREF(item);
                goto fail;
            }
            out_put(&o, PyBytes_AS_STRING(subject), len);
            published += len;
            size += share;
            Py_DECREF(item);
            count++;
            continue;
        }
        const char *subj;
        Py_ssize_t subj_len;
        if (PyBytes_Check(subject)) {
            subj = PyBytes_AS_STRING(subject);
            subj_len = PyBytes_GET_SIZE(subject);
        } else if (PyUnicode_Check(subject)) {
            subj = PyUnicode_AsUTF8AndSize(subject, &subj_len);
        } else {
            subj = NULL;
            PyErr_SetString(PyExc_TypeError, "an ack's subject must be bytes or str");
        }
        if (subj == NULL || !PyBytes_Check(payload)) {
            Py_DECREF(item);
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "an ack's payload must be bytes");
            }
            goto fail;
        }
        Py_ssize_t plen = PyBytes_GET_SIZE(payload);
        char digits[32];
        int dlen = snprintf(digits, sizeof digits, " %zd\r\n", plen);
        if (out_reserve(&o, 4 + subj_len + dlen + plen + 2) < 0) {
            Py_DECREF(item);
            goto fail;
        }
        out_put(&o, "PUB ", 4);
        out_put(&o, subj, subj_len);
        out_put(&o, digits, dlen);
        out_put(&o, PyBytes_AS_STRING(payload), plen);
        out_put(&o, "\r\n", 2);
        size += plen;
        Py_XSETREF(last, item); /* the reference popleft gave */
        count++;
    }
    commands = out_bytes(&o);
    if (commands != NULL) {
        return Py_BuildValue("(NLLLN)", commands, count, size, published, last != NULL ? last : Py_NewRef(Py_None));
    }
fail:
    PyMem_Free(o.buf);
    Py_XDECREF(last);
    return NULL;
}

static int is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* The plain acknowledgement {"stream":"<name>","seq":<digits>} (spaces allowed
 * after the comma and at the end, as the server's encoder may write them):
 * 1 with the name's span and the sequence, else 0. */
static int plain_ack(const char *p, Py_ssize_t n, const char **name_p, Py_ssize_t *name_len_p, long long *seq_p) {
    Py_ssize_t i = 11;
    if (n < 11 || memcmp(p, "{\"stream\":\"", 11) != 0) {
        return 0;
    }
    Py_ssize_t name = i;
    while (i < n && p[i] != '"' && p[i] != '\\') {
        i++;
    }
    Py_ssize_t name_len = i - name;
    if (name_len == 0 || i + 2 > n || p[i] != '"' || p[i + 1] != ',') {
        return 0;
    }
    i += 2;
    while (i < n && is_json_space(p[i])) {
        i++;
    }
    if (n - i < 6 || memcmp(p + i, "\"seq\":", 6) != 0) {
        return 0;
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
        return 0;  /* no digits, more than 18 of them, or something else follows */
    }
    for (i++; i < n; i++) {
        if (!is_json_space(p[i])) {
            return 0;
        }
    }
    *name_p = p + name;
    *name_len_p = name_len;
    *seq_p = seq;
    return 1;
}

/* puback(data) -> (stream: bytes, seq: int) of the plain acknowledgement, else None. */
static PyObject *puback(PyObject *module, PyObject *data) {
    if (!PyBytes_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "puback() takes bytes");
        return NULL;
    }
    const char *name;
    Py_ssize_t name_len;
    long long seq;
    if (!plain_ack(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), &name, &name_len, &seq)) {
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(y#L)", name, name_len, seq);
}

/* -- the async publisher's acknowledgements --------------------------------
 *
 * PubAckRouter(publisher, prefix, inflight, future_type, make_ack, on_reply, done, pending, finished)
 * is the handler of AsyncPublisher's reply subscription (_publisher.py).
 * Called, it is on_reply. scan() instead takes each plain acknowledgement
 * without headers to route_ack(), which does what on_reply and done do for
 * it when nothing watches the future but its owner (no Condition made: no
 * waiter, no callback; an owner's wake lock is released): pops the future
 * from inflight by the subject's token, makes make_ack(stream, seq), sets
 * the future's result, lets go of its payload and counts it in
 * publisher._completed, calling publisher._freed() while publishers wait
 * for the window. A watched future goes to done(future, ack, None);
 * anything else to on_reply, so Python stays the only reader of the other
 * cases. No Python code runs between reading the future's watchers and
 * setting its state: under the GIL that is the atomic step
 * _finish_unwatched takes _COND_LOCK for. */

typedef struct {
    PyObject_HEAD
    PyObject *publisher, *prefix, *inflight, *future_type, *make_ack, *on_reply, *done, *pending, *finished;
    PyObject *last_raw, *last_name; /* the last stream name as received, and as str */
} router;

static PyObject *str_cond, *str_wake, *str_state, *str_result, *str_headers, *str_completed,
    *str_waiters, *str_freed, *str_release, *empty_bytes;

/* The fields a router holds, in the constructor's order (last_* are its cache). */
#define ROUTER_ARGS(r) {&(r)->publisher, &(r)->prefix, &(r)->inflight, &(r)->future_type, &(r)->make_ack, \
                        &(r)->on_reply, &(r)->done, &(r)->pending, &(r)->finished, &(r)->last_raw, &(r)->last_name}
enum { N_ROUTER_ARGS = 9, N_ROUTER_FIELDS = 11 };

static int router_traverse(router *r, visitproc visit, void *arg) {
    PyObject **fields[N_ROUTER_FIELDS] = ROUTER_ARGS(r);
    for (int i = 0; i < N_ROUTER_FIELDS; i++) {
        Py_VISIT(*fields[i]);
    }
    return 0;
}

static int router_clear(router *r) {
    PyObject **fields[N_ROUTER_FIELDS] = ROUTER_ARGS(r);
    for (int i = 0; i < N_ROUTER_FIELDS; i++) {
        Py_CLEAR(*fields[i]);
    }
    return 0;
}

static void router_dealloc(router *r) {
    PyObject_GC_UnTrack(r);
    router_clear(r);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyObject *router_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *a[N_ROUTER_ARGS];
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "PubAckRouter() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "PubAckRouter", 9, 9, &a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &a[6], &a[7], &a[8])) {
        return NULL;
    }
    if (!PyBytes_Check(a[1]) || !PyDict_Check(a[2]) || !PyType_Check(a[3])) {
        PyErr_SetString(PyExc_TypeError, "PubAckRouter(): prefix must be bytes, inflight a dict, future_type a type");
        return NULL;
    }
    router *r = (router *)type->tp_alloc(type, 0);
    if (r == NULL) {
        return NULL;
    }
    PyObject **fields[N_ROUTER_FIELDS] = ROUTER_ARGS(r);
    for (int i = 0; i < N_ROUTER_ARGS; i++) {
        *fields[i] = Py_NewRef(a[i]);
    }
    return (PyObject *)r;
}

static PyObject *router_call(router *r, PyObject *args, PyObject *kwargs) {
    return PyObject_Call(r->on_reply, args, kwargs);
}

/* Resolve an unwatched future with ack and count it: 1; 0 when it is watched
 * (nothing changed); -1 error. */
static int resolve_unwatched(router *r, PyObject *future, PyObject *ack) {
    PyObject *cond = PyObject_GetAttr(future, str_cond);
    PyObject *wake = cond != NULL ? PyObject_GetAttr(future, str_wake) : NULL;
    PyObject *state = wake != NULL ? PyObject_GetAttr(future, str_state) : NULL;
    if (state == NULL) {
        Py_XDECREF(cond);
        Py_XDECREF(wake);
        return -1;
    }
    int unwatched = cond == Py_None && state == r->pending;
    Py_DECREF(cond);
    Py_DECREF(state);
    if (!unwatched) {
        Py_DECREF(wake);
        return 0;
    }
    /* The old values are None and "PENDING": replacing them runs no Python code.
     * _exception stays None, as a pending future has it. */
    if (PyObject_SetAttr(future, str_result, ack) < 0 || PyObject_SetAttr(future, str_state, r->finished) < 0) {
        Py_DECREF(wake);
        return -1;
    }
    /* Its owner parked on a plain lock (_wait_as_owner): released once resolved, as set_result does. */
    PyObject *released = wake != Py_None ? PyObject_CallMethodNoArgs(wake, str_release) : Py_NewRef(Py_None);
    Py_DECREF(wake);
    if (released == NULL) {
        return -1;
    }
    Py_DECREF(released);
    if (PyObject_SetAttr(future, str_data, empty_bytes) < 0 || PyObject_SetAttr(future, str_hdr, empty_bytes) < 0 ||
        PyObject_SetAttr(future, str_headers, Py_None) < 0) {
        return -1;
    }
    PyObject *completed = PyObject_GetAttr(r->publisher, str_completed);
    if (completed == NULL) {
        return -1;
    }
    long long n = PyLong_AsLongLong(completed);
    Py_DECREF(completed);
    if (n == -1 && PyErr_Occurred()) {
        return -1;
    }
    PyObject *next = PyLong_FromLongLong(n + 1);
    int rc = next != NULL ? PyObject_SetAttr(r->publisher, str_completed, next) : -1;
    Py_XDECREF(next);
    if (rc < 0) {
        return -1;
    }
    /* _completed before _waiters, as _done reads them (see there). */
    PyObject *waiters = PyObject_GetAttr(r->publisher, str_waiters);
    int waiting = waiters != NULL ? PyObject_IsTrue(waiters) : -1;
    Py_XDECREF(waiters);
    if (waiting > 0) {
        PyObject *res = PyObject_CallMethodNoArgs(r->publisher, str_freed);
        waiting = res != NULL ? 0 : -1;
        Py_XDECREF(res);
    }
    return waiting < 0 ? -1 : 1;
}

/* An acknowledgement on subject: 1 handled (resolved, handed to done, or
 * for nothing in flight: timed out already), 0 for on_reply, -1 error. */
static int route_ack(PyObject *self, const char *subj, Py_ssize_t subj_len, const char *payload, Py_ssize_t size) {
    router *r = (router *)self;
    Py_ssize_t plen = PyBytes_GET_SIZE(r->prefix);
    const char *name;
    Py_ssize_t name_len;
    long long seq;
    if (subj_len <= plen || memcmp(subj, PyBytes_AS_STRING(r->prefix), (size_t)plen) != 0 ||
        !plain_ack(payload, size, &name, &name_len, &seq)) {
        return 0;
    }
    if (r->last_name == NULL || PyBytes_GET_SIZE(r->last_raw) != name_len ||
        memcmp(PyBytes_AS_STRING(r->last_raw), name, (size_t)name_len) != 0) {
        PyObject *str = PyUnicode_DecodeUTF8(name, name_len, NULL);
        if (str == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
                return 0;  /* on_reply says what is wrong with it */
            }
            return -1;
        }
        PyObject *raw = PyBytes_FromStringAndSize(name, name_len);
        if (raw == NULL) {
            Py_DECREF(str);
            return -1;
        }
        Py_XSETREF(r->last_raw, raw);
        Py_XSETREF(r->last_name, str);
    }
    PyObject *key = PyBytes_FromStringAndSize(subj + plen, subj_len - plen);
    if (key == NULL) {
        return -1;
    }
    PyObject *future = PyDict_GetItemWithError(r->inflight, key);
    if (future == NULL || !Py_IS_TYPE(future, (PyTypeObject *)r->future_type)) {
        Py_DECREF(key);
        return PyErr_Occurred() ? -1 : future == NULL;
    }
    Py_INCREF(future);
    /* The PubAck before the pop: a future is never out of inflight unresolved. */
    PyObject *ack = NULL, *pyseq = PyLong_FromLongLong(seq);
    if (pyseq != NULL) {
        PyObject *ack_args[2] = {Py_NewRef(r->last_name), pyseq};  /* held: make_ack runs Python code */
        ack = PyObject_Vectorcall(r->make_ack, ack_args, 2, NULL);
        Py_DECREF(ack_args[0]);
        Py_DECREF(pyseq);
    }
    int rc = ack != NULL ? PyDict_DelItem(r->inflight, key) : -1;
    Py_DECREF(key);
    if (rc < 0 && ack != NULL && PyErr_ExceptionMatches(PyExc_KeyError)) {
        PyErr_Clear();  /* resolved meanwhile (the make_ack ran Python code) */
        rc = 1;
    } else if (rc == 0) {
        rc = resolve_unwatched(r, future, ack);
        if (rc == 0) {
            PyObject *done_args[3] = {future, ack, Py_None};
            PyObject *res = PyObject_Vectorcall(r->done, done_args, 3, NULL);
            rc = res != NULL ? 1 : -1;
            Py_XDECREF(res);
        }
    }
    Py_XDECREF(ack);
    Py_DECREF(future);
    return rc;
}

static PyTypeObject RouterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "jetstream_sync._core._speedups.PubAckRouter",
    .tp_basicsize = sizeof(router),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The async publisher's reply handler; scan() resolves plain acknowledgements itself.",
    .tp_new = router_new,
    .tp_dealloc = (destructor)router_dealloc,
    .tp_traverse = (traverseproc)router_traverse,
    .tp_clear = (inquiry)router_clear,
    .tp_call = (ternaryfunc)router_call,
};

/* -- Arrow columns of pulled messages (the Spark reader) -------------------- */

/* Slots of a message this reads (a subset of slot_names). */
enum { A_SUBJECT, A_REPLY, A_DATA, A_HDR_RAW, A_HEADERS, N_ASLOTS };
static const int aslot_of[N_ASLOTS] = {S_SUBJECT, S_REPLY, S_DATA, S_HDR_RAW, S_HEADERS};

#define MAX_ENTRIES 256 /* header lines of one message this parses; more: Python's */

static int is_ascii_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* str.isspace() for an ASCII character: also the information separators. */
static int is_str_space(unsigned char c) { return is_ascii_space(c) || (c >= 0x1c && c <= 0x1f); }

static void strip(const char **p, Py_ssize_t *len) {
    while (*len > 0 && is_ascii_space((unsigned char)**p)) {
        (*p)++;
        (*len)--;
    }
    while (*len > 0 && is_ascii_space((unsigned char)(*p)[*len - 1])) {
        (*len)--;
    }
}

/* 1: valid UTF-8 as Python's strict decoder reads it; 0: not; -1: error. */
static int valid_utf8(const char *p, Py_ssize_t len) {
    Py_ssize_t i = 0;
    while (i < len && (unsigned char)p[i] < 0x80) {
        i++;
    }
    if (i == len) {
        return 1;
    }
    PyObject *u = PyUnicode_DecodeUTF8(p, len, "strict");
    if (u != NULL) {
        Py_DECREF(u);
        return 1;
    }
    if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

/* Plain digits as a whole token, within int64 (a timestamp in ns has 19). */
static int token_number(const char *p, Py_ssize_t len, long long *out) {
    if (len < 1 || len > 19) {
        return 0;
    }
    long long v = 0;
    for (Py_ssize_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9' || v > (LLONG_MAX - (p[i] - '0')) / 10) {
            return 0;
        }
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 1;
}

typedef struct {
    const char *key, *val;
    Py_ssize_t key_len, val_len;
} entry;

/* The entries of a header block as parse_header_block() has them (status
 * line skipped, blank and colon-less lines skipped, names stripped and only
 * ASCII without inner whitespace, values stripped, a repeated name keeps its
 * first place and its last value). Returns the count, or -1 when Python must
 * read this block (a value that is not UTF-8, too many lines), -2 on error. */
static int header_entries(const char *raw, Py_ssize_t len, entry *out) {
    const char *end = raw + len, *p = NULL;
    for (const char *q = raw; q + 1 < end; q++) {
        if (q[0] == '\r' && q[1] == '\n') {
            p = q + 2;
            break;
        }
    }
    int n = 0;
    while (p != NULL && p < end) {
        const char *eol = p, *next = end;
        while (eol + 1 < end && !(eol[0] == '\r' && eol[1] == '\n')) {
            eol++;
        }
        if (eol + 1 < end) {
            next = eol + 2;
        } else {
            eol = end;
        }
        const char *colon = memchr(p, ':', (size_t)(eol - p));
        if (colon != NULL) {
            const char *k = p, *v = colon + 1;
            Py_ssize_t kl = colon - p, vl = eol - v;
            strip(&k, &kl);
            strip(&v, &vl);
            int ok = 1;
            for (Py_ssize_t i = 0; i < kl && ok; i++) {
                unsigned char c = (unsigned char)k[i];
                ok = c < 0x80 && !is_str_space(c);
            }
            if (ok) {
                int u = valid_utf8(v, vl);
                if (u != 1) {
                    return u == 0 ? -1 : -2;
                }
                int at = 0;
                while (at < n && !(out[at].key_len == kl && memcmp(out[at].key, k, (size_t)kl) == 0)) {
                    at++;
                }
                if (at == n) {
                    if (n == MAX_ENTRIES) {
                        return -1;
                    }
                    out[n].key = k;
                    out[n].key_len = kl;
                    n++;
                }
                out[at].val = v;
                out[at].val_len = vl;
            }
        }
        p = next;
    }
    return n;
}

/* A column's buffer: its bytes, and how many are filled. */
typedef struct {
    PyObject *b;
    Py_ssize_t at;
} column;

/* Every column is filled front to back; only the validity bitmap is zeroed (bits are or-ed in). */
static int col_new(column *c, Py_ssize_t size) {
    c->b = PyBytes_FromStringAndSize(NULL, size);
    c->at = 0;
    return c->b != NULL ? 0 : -1;
}

static void col_put(column *c, const void *p, Py_ssize_t n) {
    memcpy(PyBytes_AS_STRING(c->b) + c->at, p, (size_t)n);
    c->at += n;
}

static void col_i32(column *c, int32_t v) { col_put(c, &v, 4); }
static void col_i64(column *c, int64_t v) { col_put(c, &v, 8); }

/* arrow_rows(msgs, with_headers, stream) -> the Arrow buffers of the reader's rows, else None
 *
 * msgs: a list of one message type (WireMsg's slots), as pulled; stream: the
 * stream's name (bytes), the first column of every row. Returns (stream
 * offsets, stream values, subject offsets, subject values, seq, data offsets, data values,
 * timestamp µs, header validity, header offsets, key offsets, key values,
 * value offsets, value values, header nulls), little-endian int32 offsets
 * and int64 values as pyarrow reads them, the same rows the Python path
 * (read_range_arrow) makes. None when any message is not plain (not bytes,
 * headers already parsed, a subject or header value that is not UTF-8, an
 * ack subject of another shape than the first's, 2 GiB of a column): then
 * Python makes the whole batch, so the accelerator is never its only reader. */
static PyObject *arrow_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyList_CheckExact(args[0]) || !PyBytes_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "arrow_rows() takes a list, a bool and bytes");
        return NULL;
    }
    const char *stream = PyBytes_AS_STRING(args[2]);
    Py_ssize_t stream_len = PyBytes_GET_SIZE(args[2]);
    PyObject *msgs = args[0];
    int with_headers = PyObject_IsTrue(args[1]);
    if (with_headers < 0) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(msgs);
    if (n == 0) {
        Py_RETURN_NONE;
    }
    wire_layout layout = {NULL, {0}};
    if (!learn_wire(Py_TYPE(PyList_GET_ITEM(msgs, 0)), &layout)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t off[N_ASLOTS];
    for (int i = 0; i < N_ASLOTS; i++) {
        off[i] = layout.off[aslot_of[i]];
    }
#define SLOT(o, i) (*(PyObject **)((char *)(o) + off[i]))
    /* Pass 1: every message plain, the columns' sizes, the ack subjects' shape. */
    long long subj_total = 0, data_total = 0;
    int ntok_first = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *m = PyList_GET_ITEM(msgs, i);
        if (Py_TYPE(m) != layout.type) {
            goto plain_no;
        }
        PyObject *s = SLOT(m, A_SUBJECT), *r = SLOT(m, A_REPLY), *d = SLOT(m, A_DATA), *h = SLOT(m, A_HDR_RAW);
        if (s == NULL || r == NULL || d == NULL || h == NULL || SLOT(m, A_HEADERS) != Py_None || !PyBytes_CheckExact(s) ||
            !PyBytes_CheckExact(r) || !PyBytes_CheckExact(d) || (h != Py_None && !PyBytes_CheckExact(h))) {
            goto plain_no;
        }
        int u = valid_utf8(PyBytes_AS_STRING(s), PyBytes_GET_SIZE(s));
        if (u < 0) {
            goto fail;
        }
        if (u == 0) {
            goto plain_no;
        }
        const char *rp = PyBytes_AS_STRING(r);
        Py_ssize_t rl = PyBytes_GET_SIZE(r);
        int dots = 0;
        for (Py_ssize_t j = 0; j < rl; j++) {
            dots += rp[j] == '.';
        }
        if (ntok_first < 0) {
            ntok_first = dots + 1;
        } else if (dots + 1 != ntok_first) {
            goto plain_no;
        }
        subj_total += PyBytes_GET_SIZE(s);
        data_total += PyBytes_GET_SIZE(d);
        if (subj_total > INT32_MAX || data_total > INT32_MAX) {
            goto plain_no;
        }
    }
    /* v1 (9 tokens) or v2 (12): other shapes are Python's, which counts from the end */
    if ((ntok_first != 9 && ntok_first != 12) || stream_len * (long long)n > INT32_MAX) {
        goto plain_no;
    }
    int i_seq = ntok_first == 9 ? 5 : 7, i_ts = i_seq + 2;

    column sto = {0}, stv = {0}, so = {0}, sv = {0}, sq = {0}, dof = {0}, dv = {0}, ts = {0}, hv = {0}, ho = {0};
    outbuf ko = {0}, kv = {0}, vo = {0}, vv = {0};
    entry *ents = NULL;
    PyObject *result = NULL;
    Py_ssize_t hnull = 0;
    int32_t nkeys = 0;
    if (col_new(&sto, (n + 1) * 4) < 0 || col_new(&stv, stream_len * n) < 0 || col_new(&so, (n + 1) * 4) < 0 || col_new(&sv, (Py_ssize_t)subj_total) < 0 || col_new(&sq, n * 8) < 0 ||
        col_new(&dof, (n + 1) * 4) < 0 || col_new(&dv, (Py_ssize_t)data_total) < 0 || col_new(&ts, n * 8) < 0 ||
        col_new(&hv, with_headers ? (n + 7) / 8 : 0) < 0 || col_new(&ho, with_headers ? (n + 1) * 4 : 0) < 0) {
        goto done;
    }
    memset(PyBytes_AS_STRING(hv.b), 0, (size_t)PyBytes_GET_SIZE(hv.b));
    if (with_headers) {
        ents = PyMem_Malloc(sizeof(entry) * MAX_ENTRIES);
        if (ents == NULL || out_reserve(&ko, 4) < 0 || out_reserve(&vo, 4) < 0) {
            if (ents == NULL) {
                PyErr_NoMemory();
            }
            goto done;
        }
        int32_t zero = 0;
        out_put(&ko, (const char *)&zero, 4);
        out_put(&vo, (const char *)&zero, 4);
        col_i32(&ho, 0);
    }
    col_i32(&sto, 0);
    col_i32(&so, 0);
    col_i32(&dof, 0);
    /* Pass 2: fill. */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyList_GET_SIZE(msgs) != n) {
            goto plain_no_cols;
        }
        PyObject *m = PyList_GET_ITEM(msgs, i);
        PyObject *s = SLOT(m, A_SUBJECT), *r = SLOT(m, A_REPLY), *d = SLOT(m, A_DATA), *h = SLOT(m, A_HDR_RAW);
        /* As the first pass found it? Only a finalizer run by an allocation here
         * could have changed it; the value columns are sized by that pass. */
        if (Py_TYPE(m) != layout.type || s == NULL || r == NULL || d == NULL || h == NULL || !PyBytes_CheckExact(s) ||
            !PyBytes_CheckExact(r) || !PyBytes_CheckExact(d) || (h != Py_None && !PyBytes_CheckExact(h)) ||
            PyBytes_GET_SIZE(s) > PyBytes_GET_SIZE(sv.b) - sv.at || PyBytes_GET_SIZE(d) > PyBytes_GET_SIZE(dv.b) - dv.at) {
            goto plain_no_cols;
        }
        col_put(&stv, stream, stream_len);
        col_i32(&sto, (int32_t)stv.at);
        col_put(&sv, PyBytes_AS_STRING(s), PyBytes_GET_SIZE(s));
        col_i32(&so, (int32_t)sv.at);
        col_put(&dv, PyBytes_AS_STRING(d), PyBytes_GET_SIZE(d));
        col_i32(&dof, (int32_t)dv.at);
        const char *rp = PyBytes_AS_STRING(r), *tok = rp;
        Py_ssize_t rl = PyBytes_GET_SIZE(r);
        long long seq = -1, nanos = -1;
        int t = 0;
        for (Py_ssize_t j = 0; j <= rl; j++) {
            if (j == rl || rp[j] == '.') {
                Py_ssize_t len = rp + j - tok;
                if ((t == i_seq && !token_number(tok, len, &seq)) || (t == i_ts && !token_number(tok, len, &nanos))) {
                    goto plain_no_cols;
                }
                t++;
                tok = rp + j + 1;
            }
        }
        col_i64(&sq, (int64_t)seq);
        col_i64(&ts, (int64_t)(nanos / 1000));
        if (!with_headers) {
            continue;
        }
        int ne = 0;
        if (h != Py_None && PyBytes_GET_SIZE(h) > 0) {
            ne = header_entries(PyBytes_AS_STRING(h), PyBytes_GET_SIZE(h), ents);
            if (ne == -2) {
                goto done;
            }
            if (ne == -1) {
                goto plain_no_cols;
            }
        }
        if (ne == 0) {
            hnull++;
        } else {
            PyBytes_AS_STRING(hv.b)[i / 8] |= (char)(1 << (i % 8));
            for (int e = 0; e < ne; e++) {
                if (out_reserve(&kv, ents[e].key_len) < 0 || out_reserve(&vv, ents[e].val_len) < 0 ||
                    out_reserve(&ko, 4) < 0 || out_reserve(&vo, 4) < 0) {
                    goto done;
                }
                out_put(&kv, ents[e].key, ents[e].key_len);
                out_put(&vv, ents[e].val, ents[e].val_len);
                if (kv.len > INT32_MAX || vv.len > INT32_MAX) {
                    goto plain_no_cols;
                }
                int32_t ke = (int32_t)kv.len, ve = (int32_t)vv.len;
                out_put(&ko, (const char *)&ke, 4);
                out_put(&vo, (const char *)&ve, 4);
            }
            nkeys += ne;
        }
        col_i32(&ho, nkeys);
    }
    {
        PyObject *kob = out_bytes(&ko), *kvb = out_bytes(&kv), *vob = out_bytes(&vo), *vvb = out_bytes(&vv);
        if (kob != NULL && kvb != NULL && vob != NULL && vvb != NULL) {
            result = Py_BuildValue("(OOOOOOOOOOOOOOn)", sto.b, stv.b, so.b, sv.b, sq.b, dof.b, dv.b, ts.b, hv.b, ho.b, kob, kvb, vob,
                                   vvb, hnull);
        }
        Py_XDECREF(kob);
        Py_XDECREF(kvb);
        Py_XDECREF(vob);
        Py_XDECREF(vvb);
    }
    goto done;
plain_no_cols:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(sto.b);
    Py_XDECREF(stv.b);
    Py_XDECREF(so.b);
    Py_XDECREF(sv.b);
    Py_XDECREF(sq.b);
    Py_XDECREF(dof.b);
    Py_XDECREF(dv.b);
    Py_XDECREF(ts.b);
    Py_XDECREF(hv.b);
    Py_XDECREF(ho.b);
    PyMem_Free(ko.buf);
    PyMem_Free(kv.buf);
    PyMem_Free(vo.buf);
    PyMem_Free(vv.buf);
    PyMem_Free(ents);
    Py_XDECREF(layout.type);
    return result;
plain_no:
    Py_XDECREF(layout.type);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(layout.type);
    return NULL;
#undef SLOT
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL, "Parse the run of MSG/HMSG messages at pos (see the module source)."},
    {"pub_batch", (PyCFunction)(void (*)(void))pub_batch, METH_FASTCALL, "Every queued publish as PUB/HPUB lines (see the module source)."},
    {"ack_batch", (PyCFunction)ack_batch, METH_O, "Every queued ack and core publish as one bytes object (see the module source)."},
    {"puback", (PyCFunction)puback, METH_O, "(stream, seq) of a plain PubAck, else None."},
    {"arrow_rows", (PyCFunction)(void (*)(void))arrow_rows, METH_FASTCALL, "Arrow buffers of pulled messages (see the module source)."},
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
    str_cond = PyUnicode_InternFromString("_cond");
    str_wake = PyUnicode_InternFromString("_wake");
    str_state = PyUnicode_InternFromString("_state");
    str_result = PyUnicode_InternFromString("_result");
    str_headers = PyUnicode_InternFromString("_headers");
    str_completed = PyUnicode_InternFromString("_completed");
    str_waiters = PyUnicode_InternFromString("_waiters");
    str_freed = PyUnicode_InternFromString("_freed");
    str_release = PyUnicode_InternFromString("release");
    empty_bytes = PyBytes_FromStringAndSize(NULL, 0);
    if (str_subject == NULL || str_data == NULL || str_hdr == NULL || str_popleft == NULL || str_cond == NULL ||
        str_wake == NULL || str_state == NULL || str_result == NULL || str_headers == NULL ||
        str_completed == NULL || str_waiters == NULL || str_freed == NULL || str_release == NULL || empty_bytes == NULL) {
        return NULL;
    }
    if (PyType_Ready(&RouterType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "PubAckRouter", (PyObject *)&RouterType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
