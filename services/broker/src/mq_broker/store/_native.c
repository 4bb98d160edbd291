/*
 * mq_broker.store._native: the CommitLog append loop of one batch, and its index entries, in C.
 *
 * Mirrors org.apache.rocketmq.store.CommitLog.DefaultAppendMessageCallback#doAppend (message format v1): for
 * every message that needs no special handling it fills QUEUEOFFSET, PHYSICALOFFSET, STORETIMESTAMP and
 * STOREHOST, computes BODYCRC (zlib crc32, sign bit cleared) and writes the record straight into the mapped
 * file. It stops at the first message the Python path must handle (a limit exceeded, a record too large for
 * any file, or no room left in this file: END_OF_FILE), so rolling files and refusing messages stay in
 * commit_log.py. Records are byte-identical to mq_common.codec.encode_message (a test checks it).
 *
 * Runs on the event loop thread with the GIL held (the mapped file must not change under it).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_native.h"

static PyObject *crc32_func;  /* zlib.crc32 */
static PyObject *s_topic, *s_queue_id, *s_body, *s_properties_string, *s_flag, *s_sys_flag, *s_born_ts,
    *s_born_host, *s_reconsume_times, *s_tags_code;

/* The fields of one message, borrowed or owned as marked. */
typedef struct {
    PyObject *topic_obj, *body_obj, *props_obj, *born_host_obj, *tags_obj; /* owned */
    const char *topic;
    Py_ssize_t topic_len;
    const char *props;
    Py_ssize_t props_len;
    const char *body;
    Py_ssize_t body_len;
    const char *born_host;
    Py_ssize_t born_host_len;
    long long queue_id, flag, sys_flag, born_ts, reconsume_times;
} Fields;

static void fields_release(Fields *f) {
    Py_XDECREF(f->topic_obj);
    Py_XDECREF(f->body_obj);
    Py_XDECREF(f->props_obj);
    Py_XDECREF(f->born_host_obj);
    Py_XDECREF(f->tags_obj);
}

static int get_ll(PyObject *msg, PyObject *name, long long *out) {
    PyObject *v = PyObject_GetAttr(msg, name);
    if (v == NULL) return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* 0 on success, -1 with an exception set. */
static int fields_read(PyObject *msg, Fields *f) {
    memset(f, 0, sizeof(*f));
    if ((f->topic_obj = PyObject_GetAttr(msg, s_topic)) == NULL) return -1;
    if ((f->topic = PyUnicode_AsUTF8AndSize(f->topic_obj, &f->topic_len)) == NULL) return -1;
    if ((f->props_obj = PyObject_GetAttr(msg, s_properties_string)) == NULL) return -1;
    if ((f->props = PyUnicode_AsUTF8AndSize(f->props_obj, &f->props_len)) == NULL) return -1;
    if ((f->body_obj = PyObject_GetAttr(msg, s_body)) == NULL) return -1;
    if (!PyBytes_Check(f->body_obj)) {
        PyErr_SetString(PyExc_TypeError, "body must be bytes");
        return -1;
    }
    f->body = PyBytes_AS_STRING(f->body_obj);
    f->body_len = PyBytes_GET_SIZE(f->body_obj);
    if ((f->born_host_obj = PyObject_GetAttr(msg, s_born_host)) == NULL) return -1;
    if (!PyBytes_Check(f->born_host_obj)) {
        PyErr_SetString(PyExc_TypeError, "born_host must be bytes");
        return -1;
    }
    f->born_host = PyBytes_AS_STRING(f->born_host_obj);
    f->born_host_len = PyBytes_GET_SIZE(f->born_host_obj);
    if (f->born_host_len != IPV4_HOST_BYTES && f->born_host_len != IPV6_HOST_BYTES) {
        PyErr_SetString(PyExc_ValueError, "born_host must be 8 or 20 bytes");
        return -1;
    }
    if (get_ll(msg, s_queue_id, &f->queue_id) || get_ll(msg, s_flag, &f->flag) ||
        get_ll(msg, s_sys_flag, &f->sys_flag) || get_ll(msg, s_born_ts, &f->born_ts) ||
        get_ll(msg, s_reconsume_times, &f->reconsume_times))
        return -1;
    if ((f->tags_obj = PyObject_GetAttr(msg, s_tags_code)) == NULL) return -1;
    return 0;
}

static int body_crc(const Fields *f, uint32_t *out) {
    PyObject *r = PyObject_CallOneArg(crc32_func, f->body_obj);
    if (r == NULL) return -1;
    unsigned long v = PyLong_AsUnsignedLong(r);
    Py_DECREF(r);
    if (v == (unsigned long)-1 && PyErr_Occurred()) return -1;
    *out = (uint32_t)(v & 0x7FFFFFFFu);
    return 0;
}

static void write_record(unsigned char *p, const Fields *f, uint32_t total, uint32_t crc, int64_t queue_offset,
                         int64_t phys, int32_t sys_flag, int64_t store_ts, const char *store_host,
                         Py_ssize_t store_host_len) {
    unsigned char *head = p;
    put_u32(p + BODY_CRC_OFFSET, crc);
    put_u32(p + QUEUE_ID_OFFSET, (uint32_t)f->queue_id);
    put_u32(p + FLAG_OFFSET, (uint32_t)f->flag);
    put_u64(p + QUEUE_OFFSET_OFFSET, (uint64_t)queue_offset);
    put_u64(p + PHYSICAL_OFFSET_OFFSET, (uint64_t)phys);
    put_u32(p + SYS_FLAG_OFFSET, (uint32_t)sys_flag);
    put_u64(p + BORN_TIMESTAMP_OFFSET, (uint64_t)f->born_ts);
    p += BORN_HOST_OFFSET;
    memcpy(p, f->born_host, (size_t)f->born_host_len);
    p += f->born_host_len;
    put_u64(p, (uint64_t)store_ts);
    p += STORE_TIMESTAMP_BYTES;
    memcpy(p, store_host, (size_t)store_host_len);
    p += store_host_len;
    put_u32(p, (uint32_t)f->reconsume_times);
    p += RECONSUME_TIMES_BYTES;
    put_u64(p, 0); /* PREPAREDTRANSACTIONOFFSET */
    p += PREPARED_TRANSACTION_OFFSET_BYTES;
    put_u32(p, (uint32_t)f->body_len);
    p += BODY_LENGTH_BYTES;
    memcpy(p, f->body, (size_t)f->body_len);
    p += f->body_len;
    *p = (unsigned char)f->topic_len; /* TOPICLEN: one byte */
    p += TOPIC_LENGTH_BYTES;
    memcpy(p, f->topic, (size_t)f->topic_len);
    p += f->topic_len;
    p[0] = (unsigned char)(f->props_len >> 8); /* PROPERTIESLEN: u16 */
    p[1] = (unsigned char)f->props_len;
    memcpy(p + PROPERTIES_LENGTH_BYTES, f->props, (size_t)f->props_len);
    /* TOTALSIZE and MAGICCODE last: a process killed in the middle of this record leaves zeros (the file's
     * fresh or zeroed tail) where recovery looks for the magic code, so it never accepts a torn record whose
     * body CRC holds but whose properties were cut. The fence keeps the compiler from moving the stores. */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    put_u32(head + TOTAL_SIZE_OFFSET, total);
    put_u32(head + MAGIC_CODE_OFFSET, MESSAGE_MAGIC_CODE);
}

/* The next queue offset of topic-queueId from the topic-queue table; stores offset + 1. -1 on error. */
static int64_t next_queue_offset(PyObject *table, const Fields *f) {
    PyObject *key = PyUnicode_FromFormat("%U-%lld", f->topic_obj, f->queue_id);
    if (key == NULL) return -1;
    int64_t offset = 0;
    PyObject *current = PyDict_GetItemWithError(table, key); /* borrowed */
    if (current != NULL) {
        offset = PyLong_AsLongLong(current);
        if (offset == -1 && PyErr_Occurred()) {
            Py_DECREF(key);
            return -1;
        }
    } else if (PyErr_Occurred()) {
        Py_DECREF(key);
        return -1;
    }
    PyObject *next = PyLong_FromLongLong(offset + 1);
    int rc = next == NULL ? -1 : PyDict_SetItem(table, key, next);
    Py_XDECREF(next);
    Py_DECREF(key);
    return rc < 0 ? -1 : offset;
}

PyDoc_STRVAR(append_records_doc,
"append_records(buf, wrote_position, file_size, file_from_offset, messages, start, topic_queue_table,\n"
"               store_timestamp_ms, store_host, max_body_bytes, max_record_bytes) -> (stop, wrote_position, placed)\n"
"\n"
"Append messages[start:] as v1 records into the writable buffer ``buf`` (one mapped file of ``file_size``\n"
"bytes starting at CommitLog offset ``file_from_offset``) from ``wrote_position``, while each fits with room\n"
"for the 8-byte END_OF_FILE blank and needs no refusal. ``placed`` holds one (physical offset, size, queue\n"
"offset, tags code, dispatchable, sys flag) tuple per appended message; ``stop`` is the index of the first message not\n"
"appended (len(messages) when all were). Queue offsets come from and advance ``topic_queue_table``\n"
"('topic-queueId' -> next offset) for dispatchable messages (not prepared/rolled-back transactions).\n"
"Raises TypeError/ValueError for malformed message fields (nothing of that message is written).");

static PyObject *append_records(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *buf_obj, *messages, *table, *store_host_obj;
    Py_ssize_t pos, file_size, start;
    long long file_from, store_ts, max_body, max_record;
    if (!PyArg_ParseTuple(args, "OnnLOnO!LSLL", &buf_obj, &pos, &file_size, &file_from, &messages, &start,
                          &PyDict_Type, &table, &store_ts, &store_host_obj, &max_body, &max_record))
        return NULL;
    PyObject *seq = PySequence_Fast(messages, "messages must be a sequence");
    if (seq == NULL) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(buf_obj, &view, PyBUF_WRITABLE) < 0) {
        Py_DECREF(seq);
        return NULL;
    }
    const char *store_host = PyBytes_AS_STRING(store_host_obj);
    Py_ssize_t store_host_len = PyBytes_GET_SIZE(store_host_obj);
    PyObject *placed = PyList_New(0);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    Py_ssize_t i = start;
    if (placed == NULL) goto error;
    if (file_size > view.len || pos < 0 || pos > file_size ||
        (store_host_len != IPV4_HOST_BYTES && store_host_len != IPV6_HOST_BYTES)) {
        PyErr_SetString(PyExc_ValueError, "bad buffer, position or store host");
        goto error;
    }
    for (; i < n; i++) {
        Fields f;
        if (fields_read(PySequence_Fast_GET_ITEM(seq, i), &f) < 0) {
            fields_release(&f);
            if (i == start) goto error;
            PyErr_Clear(); /* keep what is appended; the next call raises for this message */
            break;
        }
        int32_t sys_flag = (int32_t)(f.sys_flag & ~HOST_V6_FLAGS);
        if (f.born_host_len == IPV6_HOST_BYTES) sys_flag |= BORN_HOST_V6_FLAG;
        if (store_host_len == IPV6_HOST_BYTES) sys_flag |= STORE_HOST_V6_FLAG;
        long long total =
            RECORD_FIXED_BYTES + f.born_host_len + store_host_len + f.body_len + f.topic_len + f.props_len;
        if (f.body_len > max_body || f.topic_len > MAX_TOPIC_BYTES || f.props_len > MAX_PROPERTIES_BYTES ||
            total > max_record || total + END_FILE_MIN_BLANK_LENGTH > file_size ||
            total + END_FILE_MIN_BLANK_LENGTH > file_size - pos) {
            fields_release(&f);
            break; /* the Python path refuses it or rolls the file */
        }
        uint32_t crc;
        int tran = sys_flag & TRANSACTION_MASK;
        int dispatchable = tran != TRANSACTION_PREPARED && tran != TRANSACTION_ROLLBACK;
        int64_t queue_offset = 0;
        if (body_crc(&f, &crc) < 0 || (dispatchable && (queue_offset = next_queue_offset(table, &f)) < 0)) {
            fields_release(&f);
            goto error;
        }
        int64_t phys = file_from + pos;
        write_record((unsigned char *)view.buf + pos, &f, (uint32_t)total, crc, queue_offset, phys, sys_flag,
                     store_ts, store_host, store_host_len);
        PyObject *item = Py_BuildValue("(LLLOOi)", (long long)phys, total, (long long)queue_offset, f.tags_obj,
                                       dispatchable ? Py_True : Py_False, (int)sys_flag);
        fields_release(&f);
        if (item == NULL || PyList_Append(placed, item) < 0) {
            Py_XDECREF(item);
            goto error;
        }
        Py_DECREF(item);
        pos += (Py_ssize_t)total;
    }
    PyBuffer_Release(&view);
    Py_DECREF(seq);
    return Py_BuildValue("(nnN)", i, pos, placed);
error:
    PyBuffer_Release(&view);
    Py_DECREF(seq);
    Py_XDECREF(placed);
    return NULL;
}


/* ---------------------------------------------------------------------------------------------- IndexFile */

#define INDEX_HEADER_SIZE 40
#define HASH_SLOT_SIZE 4
#define INDEX_ENTRY_SIZE 20
#define TIME_DIFF_UNIT_MS 1000
static PyObject *s_wrote_offset, *s_store_ts;
static const char UNIQ_KEY_NAME[] = "UNIQ_KEY";
static const char KEYS_NAME[] = "KEYS";

/* IndexFile#indexKeyHashMethod: Math.abs of the hash (Integer.MIN_VALUE -> 0). */
static inline int32_t abs_hash(uint32_t h) {
    int32_t v = (int32_t)h;
    if (v == INT32_MIN) return 0;
    return v < 0 ? -v : v;
}

/* The value of ``name`` in a ``k\x01v\x02`` properties string (UTF-8), or NULL. */
static const unsigned char *property_value(const unsigned char *props, Py_ssize_t len, const char *name,
                                           Py_ssize_t name_len, Py_ssize_t *value_len) {
    Py_ssize_t i = 0;
    while (i < len) {
        const unsigned char *sep = memchr(props + i, 1, (size_t)(len - i));
        if (sep == NULL) return NULL;
        Py_ssize_t key_end = sep - props;
        const unsigned char *end = memchr(sep + 1, 2, (size_t)(len - key_end - 1));
        Py_ssize_t value_end = end == NULL ? len : end - props;
        if (key_end - i == name_len && memcmp(props + i, name, (size_t)name_len) == 0) {
            *value_len = value_end - key_end - 1;
            return sep + 1;
        }
        i = value_end + 1;
    }
    return NULL;
}

typedef struct {
    unsigned char *buf;
    Py_ssize_t hash_slot_num, entries_base;
    long long count;
    long long new_slots;
    long long begin_ts;
} IndexCursor;

static void put_key(IndexCursor *c, uint32_t topic_hash, const unsigned char *key, Py_ssize_t key_len,
                    long long phys, int32_t time_diff) {
    int32_t key_hash = abs_hash(hash_utf8(topic_hash, key, key_len));
    unsigned char *slot = c->buf + INDEX_HEADER_SIZE + (key_hash % c->hash_slot_num) * HASH_SLOT_SIZE;
    int32_t slot_value = (int32_t)get_u32(slot);
    if (slot_value <= 0 || slot_value >= c->count) {
        slot_value = 0;
        c->new_slots++;
    }
    unsigned char *entry = c->buf + c->entries_base + c->count * INDEX_ENTRY_SIZE;
    put_u32(entry, (uint32_t)key_hash);
    put_u64(entry + 4, (uint64_t)phys);
    put_u32(entry + 12, (uint32_t)time_diff);
    put_u32(entry + 16, (uint32_t)slot_value);
    put_u32(slot, (uint32_t)c->count);
    c->count++;
}

/* The next non-empty space-separated word of KEYS from *pos (advanced past it), or NULL when none is left. */
static const unsigned char *next_key_word(const unsigned char *keys, Py_ssize_t keys_len, Py_ssize_t *pos,
                                          Py_ssize_t *word_len) {
    Py_ssize_t i = *pos;
    while (keys != NULL && i < keys_len && keys[i] == ' ') i++;
    if (keys == NULL || i >= keys_len) return NULL;
    Py_ssize_t end = i;
    while (end < keys_len && keys[end] != ' ') end++;
    *pos = end;
    *word_len = end - i;
    return keys + i;
}

/* Number of index keys of one message: the UNIQ_KEY plus the non-empty words of KEYS. */
static Py_ssize_t count_keys(Py_ssize_t uniq_len, const unsigned char *keys, Py_ssize_t keys_len) {
    Py_ssize_t n = uniq_len > 0 ? 1 : 0, pos = 0, word_len;
    while (next_key_word(keys, keys_len, &pos, &word_len) != NULL) n++;
    return n;
}

PyDoc_STRVAR(index_messages_doc,
"index_messages(buf, hash_slot_num, index_count, max_index_count, begin_timestamp_ms, messages, results, start,\n"
"               last_indexed_phy_offset)\n"
"    -> (stop, index_count, new_hash_slots, last_entry_phy_offset, last_entry_timestamp_ms, last_indexed_phy_offset)\n"
"\n"
"IndexService#buildIndex for messages[start:] into one index file (writable ``buf``; RocketMQ's layout: 40-byte\n"
"header, ``hash_slot_num`` 4-byte slots, 20-byte entries [key hash i32][phy offset i64][time diff s i32]\n"
"[previous entry i32]): an entry for the UNIQ_KEY and for each KEYS word of every stored message (``results[i]``\n"
"has ``wrote_offset`` >= 0 and ``store_timestamp_ms``) past ``last_indexed_phy_offset`` that is not a rolled-back\n"
"transaction. Keys hash as IndexFile#indexKeyHashMethod of 'topic#key'. Stops before a message whose entries would\n"
"pass ``max_index_count`` or when the file holds no entry yet (``index_count`` 1: the Python path sets the begin\n"
"fields); ``stop`` is that message's index. The header is left to the caller.");

static PyObject *index_messages(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *buf_obj, *messages, *results;
    Py_ssize_t hash_slot_num, start;
    long long count, max_count, begin_ts, last_indexed;
    if (!PyArg_ParseTuple(args, "OnLLLOOnL", &buf_obj, &hash_slot_num, &count, &max_count, &begin_ts, &messages,
                          &results, &start, &last_indexed))
        return NULL;
    PyObject *mseq = PySequence_Fast(messages, "messages must be a sequence");
    if (mseq == NULL) return NULL;
    PyObject *rseq = PySequence_Fast(results, "results must be a sequence");
    if (rseq == NULL) {
        Py_DECREF(mseq);
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(buf_obj, &view, PyBUF_WRITABLE) < 0) {
        Py_DECREF(mseq);
        Py_DECREF(rseq);
        return NULL;
    }
    IndexCursor c = {(unsigned char *)view.buf, hash_slot_num, INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE,
                     count, 0, begin_ts};
    Py_ssize_t n = PySequence_Fast_GET_SIZE(mseq);
    Py_ssize_t i = start;
    long long last_phys = -1, last_ts = 0;
    if (PySequence_Fast_GET_SIZE(rseq) != n || hash_slot_num <= 0 ||
        c.entries_base + max_count * INDEX_ENTRY_SIZE > view.len) {
        PyErr_SetString(PyExc_ValueError, "messages/results lengths differ or the index file is too small");
        goto error;
    }
    for (; i < n; i++) {
        PyObject *msg = PySequence_Fast_GET_ITEM(mseq, i), *res = PySequence_Fast_GET_ITEM(rseq, i);
        long long phys, ts, sys_flag;
        if (get_ll(res, s_wrote_offset, &phys) < 0) goto error;
        if (phys < 0 || phys <= last_indexed) continue;
        if (get_ll(msg, s_sys_flag, &sys_flag) < 0 || get_ll(res, s_store_ts, &ts) < 0) goto error;
        if ((sys_flag & TRANSACTION_MASK) == TRANSACTION_ROLLBACK) continue;
        PyObject *topic = PyObject_GetAttr(msg, s_topic);
        PyObject *props_obj = topic == NULL ? NULL : PyObject_GetAttr(msg, s_properties_string);
        Py_ssize_t props_len = 0, topic_len = 0, uniq_len = 0, keys_len = 0;
        const unsigned char *props = props_obj == NULL ? NULL
                                   : (const unsigned char *)PyUnicode_AsUTF8AndSize(props_obj, &props_len);
        const unsigned char *topic_utf8 = props == NULL ? NULL
                                        : (const unsigned char *)PyUnicode_AsUTF8AndSize(topic, &topic_len);
        if (topic_utf8 == NULL) {
            Py_XDECREF(topic);
            Py_XDECREF(props_obj);
            goto error;
        }
        const unsigned char *uniq = property_value(props, props_len, UNIQ_KEY_NAME, 8, &uniq_len);
        const unsigned char *keys = property_value(props, props_len, KEYS_NAME, 4, &keys_len);
        if (uniq == NULL) uniq_len = 0;
        Py_ssize_t needed = count_keys(uniq_len, keys, keys_len);
        if (c.count <= 1 || c.count + needed > max_count) {
            Py_DECREF(topic);
            Py_DECREF(props_obj);
            break; /* the Python path starts or rolls the file */
        }
        long long diff = 0;
        if (c.begin_ts > 0) {
            diff = (ts - c.begin_ts) / TIME_DIFF_UNIT_MS; /* negative -> 0 below, so truncation equals floor */
            diff = diff < 0 ? 0 : (diff > INT32_MAX ? INT32_MAX : diff);
        }
        uint32_t topic_hash = hash_utf8(0, topic_utf8, topic_len);
        topic_hash = 31 * topic_hash + '#';
        if (uniq_len > 0) put_key(&c, topic_hash, uniq, uniq_len, phys, (int32_t)diff);
        Py_ssize_t pos = 0, word_len;
        const unsigned char *word;
        while ((word = next_key_word(keys, keys_len, &pos, &word_len)) != NULL)
            put_key(&c, topic_hash, word, word_len, phys, (int32_t)diff);
        Py_DECREF(topic);
        Py_DECREF(props_obj);
        if (needed > 0) {
            last_phys = phys;
            last_ts = ts;
        }
        last_indexed = phys;
    }
    PyBuffer_Release(&view);
    Py_DECREF(mseq);
    Py_DECREF(rseq);
    return Py_BuildValue("(nLLLLL)", i, c.count, c.new_slots, last_phys, last_ts, last_indexed);
error:
    PyBuffer_Release(&view);
    Py_DECREF(mseq);
    Py_DECREF(rseq);
    return NULL;
}

/* ------------------------------------------------------------------------------------ MessageBatch (one queue) */

#define BATCH_ITEM_HEAD 20 /* TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN */
#define BATCH_ITEM_OVERHEAD 22

/* One item of a MessageBatch body (mq_common.batch_codec), pointers into the body. */
typedef struct {
    const unsigned char *body, *props;
    Py_ssize_t body_len, props_len, total;
    int32_t flag;
} BatchItem;

/* Parse the item at ``pos``; 0 on success, -1 (ValueError set) when it is malformed. */
static int batch_item(const unsigned char *p, Py_ssize_t len, Py_ssize_t pos, BatchItem *it) {
    if (len - pos < BATCH_ITEM_OVERHEAD) {
        PyErr_Format(PyExc_ValueError, "batch item at %zd: %zd bytes left, a header needs 22", pos, len - pos);
        return -1;
    }
    const unsigned char *q = p + pos;
    int64_t total = (int32_t)get_u32(q), body_len = (int32_t)get_u32(q + 16);
    if (body_len < 0 || total > len - pos || BATCH_ITEM_HEAD + body_len + 2 > total) {
        PyErr_Format(PyExc_ValueError, "batch item at %zd: TOTALSIZE %lld and BODYLEN %lld do not fit", pos,
                     (long long)total, (long long)body_len);
        return -1;
    }
    Py_ssize_t props_len = ((Py_ssize_t)q[BATCH_ITEM_HEAD + body_len] << 8) | q[BATCH_ITEM_HEAD + body_len + 1];
    if (BATCH_ITEM_OVERHEAD + body_len + props_len != total) {
        PyErr_Format(PyExc_ValueError, "batch item at %zd: TOTALSIZE %lld does not match its lengths", pos,
                     (long long)total);
        return -1;
    }
    it->flag = (int32_t)get_u32(q + 12);
    it->body = q + BATCH_ITEM_HEAD;
    it->body_len = (Py_ssize_t)body_len;
    it->props = q + BATCH_ITEM_HEAD + body_len + 2;
    it->props_len = props_len;
    it->total = (Py_ssize_t)total;
    return 0;
}

/* A property of the stored text (the item's properties, then the batch's), or NULL. */
static const unsigned char *joined_property(const BatchItem *it, const unsigned char *extra, Py_ssize_t extra_len,
                                            const char *name, Py_ssize_t name_len, Py_ssize_t *value_len) {
    const unsigned char *v = property_value(it->props, it->props_len, name, name_len, value_len);
    return v != NULL ? v : property_value(extra, extra_len, name, name_len, value_len);
}

PyDoc_STRVAR(scan_batch_doc,
"scan_batch(body, batch_properties, record_fixed_bytes)\n"
"    -> (count, index_keys, max_body_bytes, max_properties_bytes, max_record_bytes, total_record_bytes)\n"
"\n"
"Walk a MessageBatch body (items: TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN, BODY, PROPERTIESLENGTH u16,\n"
"PROPERTIES). ``batch_properties`` (UTF-8) is appended to every item's properties when stored;\n"
"``record_fixed_bytes`` is the v1 record size without body and properties (header, hosts, topic). Returns the\n"
"number of messages, their index keys (UNIQ_KEY + KEYS words), the largest body, the largest stored properties\n"
"and the largest record, and the bytes of all records. Raises ValueError for a malformed body.");

static PyObject *scan_batch(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer body, extra;
    Py_ssize_t fixed;
    if (!PyArg_ParseTuple(args, "y*y*n", &body, &extra, &fixed)) return NULL;
    const unsigned char *p = body.buf, *ex = extra.buf;
    Py_ssize_t pos = 0, count = 0, keys = 0, max_body = 0, max_props = 0, max_record = 0, total = 0;
    while (pos < body.len) {
        BatchItem it;
        if (batch_item(p, body.len, pos, &it) < 0) {
            PyBuffer_Release(&body);
            PyBuffer_Release(&extra);
            return NULL;
        }
        Py_ssize_t uniq_len = 0, keys_len = 0;
        const unsigned char *uniq = joined_property(&it, ex, extra.len, UNIQ_KEY_NAME, 8, &uniq_len);
        const unsigned char *kw = joined_property(&it, ex, extra.len, KEYS_NAME, 4, &keys_len);
        keys += count_keys(uniq == NULL ? 0 : uniq_len, kw, keys_len);
        Py_ssize_t props = it.props_len + extra.len, record = fixed + it.body_len + props;
        max_body = it.body_len > max_body ? it.body_len : max_body;
        max_props = props > max_props ? props : max_props;
        max_record = record > max_record ? record : max_record;
        total += record;
        count++;
        pos += it.total;
    }
    PyBuffer_Release(&body);
    PyBuffer_Release(&extra);
    return Py_BuildValue("(nnnnnn)", count, keys, max_body, max_props, max_record, total);
}

PyDoc_STRVAR(append_batch_doc,
"append_batch(buf, wrote_position, file_from_offset, body, topic, queue_id, first_queue_offset, sys_flag,\n"
"             born_timestamp_ms, born_host, store_timestamp_ms, store_host, batch_properties, msg_id_prefix)\n"
"    -> (wrote_position, cq_units, msg_ids)\n"
"\n"
"MessageExtEncoder#encodeBatch + DefaultAppendMessageCallback#doAppend(MessageExtBatch): every item of a\n"
"MessageBatch body as a v1 record into the writable ``buf`` (one mapped file starting at CommitLog offset\n"
"``file_from_offset``) from ``wrote_position``, with queue offsets from ``first_queue_offset`` on, BODYCRC, the\n"
"batch's properties appended to each item's, STORETIMESTAMP and STOREHOST. The caller has checked with\n"
"scan_batch that the body is well formed, within the limits, and fits before the file's 8-byte END_OF_FILE\n"
"room. Returns the new wrote position, the ConsumeQueue units of the records (20 bytes each: commit log\n"
"offset i64, size i32, tags code i64, big-endian) and the offset msg ids (``msg_id_prefix`` + 16 hex digits)\n"
"joined with commas. Raises ValueError when the records would pass the buffer.");

static PyObject *append_batch(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *buf_obj, *topic_obj;
    Py_buffer body, born_host, store_host, extra;
    Py_ssize_t pos, queue_id;
    long long file_from, queue_offset, sys_flag_in, born_ts, store_ts;
    const char *prefix;
    Py_ssize_t prefix_len;
    if (!PyArg_ParseTuple(args, "OnLy*UnLLLy*Ly*y*s#", &buf_obj, &pos, &file_from, &body, &topic_obj, &queue_id,
                          &queue_offset, &sys_flag_in, &born_ts, &born_host, &store_ts, &store_host, &extra,
                          &prefix, &prefix_len))
        return NULL;
    Py_buffer view = {0};
    PyObject *units = NULL, *ids = NULL, *result = NULL;
    Py_ssize_t topic_len;
    const char *topic = PyUnicode_AsUTF8AndSize(topic_obj, &topic_len);
    if (topic == NULL || PyObject_GetBuffer(buf_obj, &view, PyBUF_WRITABLE) < 0) goto done;
    if ((born_host.len != IPV4_HOST_BYTES && born_host.len != IPV6_HOST_BYTES) ||
        (store_host.len != IPV4_HOST_BYTES && store_host.len != IPV6_HOST_BYTES) ||
        topic_len > MAX_TOPIC_BYTES || pos < 0) {
        PyErr_SetString(PyExc_ValueError, "bad hosts, topic or position");
        goto done;
    }
    Py_ssize_t count = 0, at = 0;
    for (BatchItem it; at < body.len; at += it.total, count++)
        if (batch_item(body.buf, body.len, at, &it) < 0) goto done;
    if ((units = PyBytes_FromStringAndSize(NULL, count * 20)) == NULL) goto done;
    if ((ids = PyBytes_FromStringAndSize(NULL, count * (prefix_len + 17))) == NULL) goto done;
    int32_t sys_flag = (int32_t)(sys_flag_in & ~HOST_V6_FLAGS);
    if (born_host.len == IPV6_HOST_BYTES) sys_flag |= BORN_HOST_V6_FLAG;
    if (store_host.len == IPV6_HOST_BYTES) sys_flag |= STORE_HOST_V6_FLAG;
    unsigned char *u = (unsigned char *)PyBytes_AS_STRING(units);
    char *id = PyBytes_AS_STRING(ids);
    Fields f = {0};
    f.topic = topic;
    f.topic_len = topic_len;
    f.queue_id = queue_id;
    f.sys_flag = sys_flag;
    f.born_ts = born_ts;
    f.born_host = born_host.buf;
    f.born_host_len = born_host.len;
    at = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        BatchItem it;
        batch_item(body.buf, body.len, at, &it); /* checked above */
        at += it.total;
        Py_ssize_t props_len = it.props_len + extra.len;
        long long total = RECORD_FIXED_BYTES + born_host.len + store_host.len + it.body_len + topic_len + props_len;
        if (props_len > MAX_PROPERTIES_BYTES || pos + total > view.len) {
            PyErr_SetString(PyExc_ValueError, "a record passes the properties limit or the buffer");
            goto done;
        }
        PyObject *mv = PyMemoryView_FromMemory((char *)it.body, it.body_len, PyBUF_READ);
        PyObject *crc_obj = mv == NULL ? NULL : PyObject_CallOneArg(crc32_func, mv);
        Py_XDECREF(mv);
        if (crc_obj == NULL) goto done;
        uint32_t crc = (uint32_t)(PyLong_AsUnsignedLong(crc_obj) & 0x7FFFFFFFu);
        Py_DECREF(crc_obj);
        unsigned char *rec = (unsigned char *)view.buf + pos;
        int64_t phys = file_from + pos;
        f.body = (const char *)it.body;
        f.body_len = it.body_len;
        f.flag = it.flag;
        f.props = (const char *)it.props; /* written below: item properties, then the batch's */
        f.props_len = it.props_len;
        write_record(rec, &f, (uint32_t)total, crc, queue_offset + i, phys, sys_flag, store_ts, store_host.buf,
                     store_host.len);
        unsigned char *tail = rec + total - props_len;
        tail[-PROPERTIES_LENGTH_BYTES] = (unsigned char)(props_len >> 8); /* PROPERTIESLEN: u16 */
        tail[-PROPERTIES_LENGTH_BYTES + 1] = (unsigned char)props_len;
        memcpy(tail + it.props_len, extra.buf, (size_t)extra.len);
        Py_ssize_t tags_len = 0;
        /* the last TAGS of the stored text wins (string2messageProperties fills a map): the batch's first */
        const unsigned char *tags = property_value(extra.buf, extra.len, "TAGS", 4, &tags_len);
        if (tags == NULL) tags = property_value(it.props, it.props_len, "TAGS", 4, &tags_len);
        int64_t tags_code = tags == NULL || tags_len == 0 ? 0 : (int64_t)(int32_t)hash_utf8(0, tags, tags_len);
        put_u64(u + i * 20, (uint64_t)phys);
        put_u32(u + i * 20 + 8, (uint32_t)total);
        put_u64(u + i * 20 + 12, (uint64_t)tags_code);
        memcpy(id, prefix, (size_t)prefix_len);
        snprintf(id + prefix_len, 18, "%016llX", (unsigned long long)phys);
        id += prefix_len + 16;
        *id++ = ',';
        pos += (Py_ssize_t)total;
    }
    PyObject *joined = PyUnicode_DecodeASCII(PyBytes_AS_STRING(ids), count > 0 ? id - PyBytes_AS_STRING(ids) - 1 : 0,
                                             "strict");
    if (joined != NULL) result = Py_BuildValue("(nON)", pos, units, joined);
done:
    if (view.obj != NULL) PyBuffer_Release(&view);
    PyBuffer_Release(&body);
    PyBuffer_Release(&born_host);
    PyBuffer_Release(&store_host);
    PyBuffer_Release(&extra);
    Py_XDECREF(units);
    Py_XDECREF(ids);
    return result;
}

PyDoc_STRVAR(index_records_doc,
"index_records(buf, hash_slot_num, index_count, max_index_count, begin_timestamp_ms, log_buf, start, end,\n"
"              file_from_offset, last_indexed_phy_offset)\n"
"    -> (stop, index_count, new_hash_slots, last_entry_phy_offset, last_entry_timestamp_ms, last_indexed_phy_offset)\n"
"\n"
"index_messages for the v1 records of ``log_buf`` (one CommitLog file starting at ``file_from_offset``) in\n"
"[start, end): each record's topic, properties, SYSFLAG and STORETIMESTAMP are read from the record. ``stop`` is\n"
"the position of the first record left to the Python path (a fresh or full index file).");

static PyObject *index_records(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *buf_obj;
    Py_buffer log;
    Py_ssize_t hash_slot_num, pos, end;
    long long count, max_count, begin_ts, file_from, last_indexed;
    if (!PyArg_ParseTuple(args, "OnLLLy*nnLL", &buf_obj, &hash_slot_num, &count, &max_count, &begin_ts, &log, &pos,
                          &end, &file_from, &last_indexed))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(buf_obj, &view, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&log);
        return NULL;
    }
    IndexCursor c = {(unsigned char *)view.buf, hash_slot_num, INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE,
                     count, 0, begin_ts};
    long long last_phys = -1, last_ts = 0;
    PyObject *result = NULL;
    if (hash_slot_num <= 0 || c.entries_base + max_count * INDEX_ENTRY_SIZE > view.len || end > log.len || pos < 0) {
        PyErr_SetString(PyExc_ValueError, "the index file is too small or the range passes the log");
        goto done;
    }
    const unsigned char *lp = log.buf;
    while (pos < end) {
        const unsigned char *r = lp + pos;
        Py_ssize_t total = (Py_ssize_t)get_u32(r + TOTAL_SIZE_OFFSET);
        if (get_u32(r + MAGIC_CODE_OFFSET) != MESSAGE_MAGIC_CODE || total <= 0 || pos + total > end) {
            PyErr_Format(PyExc_ValueError, "no v1 record at %zd", pos);
            goto done;
        }
        long long phys = file_from + pos;
        if (phys <= last_indexed) {
            pos += total;
            continue;
        }
        int32_t sys_flag = (int32_t)get_u32(r + SYS_FLAG_OFFSET);
        Py_ssize_t born_len = BORN_HOST_LENGTH(sys_flag), store_len = STORE_HOST_LENGTH(sys_flag);
        long long ts = (long long)get_u64(r + STORE_TIMESTAMP_AT(born_len));
        const unsigned char *q = r + BODY_LENGTH_AT(born_len, store_len);
        Py_ssize_t body_len = (Py_ssize_t)get_u32(q);
        q += BODY_LENGTH_BYTES + body_len;
        Py_ssize_t topic_len = *q;
        const unsigned char *topic = q + TOPIC_LENGTH_BYTES;
        q += TOPIC_LENGTH_BYTES + topic_len;
        Py_ssize_t props_len = ((Py_ssize_t)q[0] << 8) | q[1];
        const unsigned char *props = q + PROPERTIES_LENGTH_BYTES;
        if ((sys_flag & TRANSACTION_MASK) == TRANSACTION_ROLLBACK) {
            last_indexed = phys;
            pos += total;
            continue;
        }
        Py_ssize_t uniq_len = 0, keys_len = 0;
        const unsigned char *uniq = property_value(props, props_len, UNIQ_KEY_NAME, 8, &uniq_len);
        const unsigned char *keys = property_value(props, props_len, KEYS_NAME, 4, &keys_len);
        if (uniq == NULL) uniq_len = 0;
        Py_ssize_t needed = count_keys(uniq_len, keys, keys_len);
        if (c.count <= 1 || c.count + needed > max_count) break; /* the Python path starts or rolls the file */
        long long diff = 0;
        if (c.begin_ts > 0) {
            diff = (ts - c.begin_ts) / TIME_DIFF_UNIT_MS;
            diff = diff < 0 ? 0 : (diff > INT32_MAX ? INT32_MAX : diff);
        }
        uint32_t topic_hash = 31 * hash_utf8(0, topic, topic_len) + '#';
        if (uniq_len > 0) put_key(&c, topic_hash, uniq, uniq_len, phys, (int32_t)diff);
        Py_ssize_t kpos = 0, word_len;
        const unsigned char *word;
        while ((word = next_key_word(keys, keys_len, &kpos, &word_len)) != NULL)
            put_key(&c, topic_hash, word, word_len, phys, (int32_t)diff);
        if (needed > 0) {
            last_phys = phys;
            last_ts = ts;
        }
        last_indexed = phys;
        pos += total;
    }
    result = Py_BuildValue("(nLLLLL)", pos, c.count, c.new_slots, last_phys, last_ts, last_indexed);
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&log);
    return result;
}


/* --- a half message's record, read for its commit (mq_broker.transaction.half_record) -------------------------- */

/* The properties a committed message does not carry over: REAL_TOPIC, REAL_QID, TRAN_MSG,
 * TRAN_PREPARED_QUEUE_OFFSET (indexes 0..3), and those a whole-transaction end reads: UNIQ_KEY, TAGS, WAIT,
 * __transactionId__, PGROUP (4..8). */
static const char *const HALF_NAMES[] = {
    "REAL_TOPIC", "REAL_QID", "TRAN_MSG", "TRAN_PREPARED_QUEUE_OFFSET", "UNIQ_KEY", "TAGS", "WAIT", "__transactionId__",
    "PGROUP"};
#define HALF_NAME_COUNT 9
#define HALF_DROPPED 4

static int half_name_index(const unsigned char *key, Py_ssize_t key_len) {
    for (int i = 0; i < HALF_NAME_COUNT; i++) {
        if ((Py_ssize_t)strlen(HALF_NAMES[i]) == key_len && memcmp(key, HALF_NAMES[i], (size_t)key_len) == 0)
            return i;
    }
    return -1;
}

/* A str of UTF-8 text, or ``fallback`` (a new reference) when ``text`` is NULL. */
static PyObject *utf8_or(const unsigned char *text, Py_ssize_t len, PyObject *fallback) {
    if (text == NULL) {
        Py_INCREF(fallback);
        return fallback;
    }
    return PyUnicode_DecodeUTF8((const char *)text, len, "strict");
}

PyDoc_STRVAR(half_record_doc,
"half_record(raw, check_crc, /) -> tuple\n"
"\n"
"The fields of the v1 record ``raw`` (one whole record, bytes) a whole-transaction commit needs, in the order of\n"
"mq_broker.transaction.half_record.HalfRecord: topic, queue offset, CommitLog offset, SYSFLAG, FLAG, born time,\n"
"born host (as stored), reconsume times, body, properties text, ``raw`` itself, the properties text without\n"
"REAL_TOPIC / REAL_QID / TRAN_MSG / TRAN_PREPARED_QUEUE_OFFSET (split on \\x02 and joined again, as\n"
"str.split/str.join), REAL_TOPIC, REAL_QID, the identity (TRAN_PREPARED_QUEUE_OFFSET when all digits, else the\n"
"queue offset), UNIQ_KEY ('' when absent; the first of each), TAGS (None when absent), whether WAIT is not\n"
"'false', __transactionId__ and PGROUP ('' when absent). Raises ValueError for a short, malformed or\n"
"(``check_crc``) damaged record, UnicodeDecodeError for text that is not UTF-8.");

static PyObject *half_record(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *raw_obj;
    int check_crc;
    if (!PyArg_ParseTuple(args, "Sp", &raw_obj, &check_crc)) return NULL;
    const unsigned char *r = (const unsigned char *)PyBytes_AS_STRING(raw_obj);
    Py_ssize_t len = PyBytes_GET_SIZE(raw_obj);
    if (len < MIN_RECORD_BYTES || get_u32(r + MAGIC_CODE_OFFSET) != MESSAGE_MAGIC_CODE ||
        (Py_ssize_t)get_u32(r + TOTAL_SIZE_OFFSET) != len) {
        PyErr_SetString(PyExc_ValueError, "not a whole v1 record");
        return NULL;
    }
    int32_t sys_flag = (int32_t)get_u32(r + SYS_FLAG_OFFSET);
    Py_ssize_t born_len = BORN_HOST_LENGTH(sys_flag), store_len = STORE_HOST_LENGTH(sys_flag);
    Py_ssize_t p = BODY_LENGTH_AT(born_len, store_len);
    if (p + BODY_LENGTH_BYTES > len) goto malformed;
    Py_ssize_t body_len = (Py_ssize_t)(int32_t)get_u32(r + p);
    p += BODY_LENGTH_BYTES;
    if (body_len < 0 || p + body_len + TOPIC_LENGTH_BYTES > len) goto malformed;
    Py_ssize_t body_at = p;
    p += body_len;
    Py_ssize_t topic_len = r[p];
    p += TOPIC_LENGTH_BYTES;
    Py_ssize_t topic_at = p;
    p += topic_len;
    if (p + PROPERTIES_LENGTH_BYTES > len) goto malformed;
    Py_ssize_t props_len = ((Py_ssize_t)r[p] << 8) | r[p + 1];
    p += PROPERTIES_LENGTH_BYTES;
    if (p + props_len != len) goto malformed;
    const unsigned char *props = r + p;

    PyObject *body = NULL, *crc = NULL, *kept = NULL, *result = NULL;
    unsigned char *out = NULL;
    body = PyBytes_FromStringAndSize((const char *)r + body_at, body_len);
    if (body == NULL) goto done;
    if (check_crc) {
        crc = PyObject_CallOneArg(crc32_func, body);
        if (crc == NULL) goto done;
        uint32_t computed = (uint32_t)(PyLong_AsUnsignedLong(crc) & 0x7FFFFFFFu);
        if (PyErr_Occurred()) goto done;
        if (computed != get_u32(r + BODY_CRC_OFFSET)) {
            PyErr_SetString(PyExc_ValueError, "body CRC mismatch");
            goto done;
        }
    }
    /* split on \x02; drop the committed-away names; keep the first value of each name the commit reads */
    const unsigned char *found[HALF_NAME_COUNT] = {NULL};
    Py_ssize_t found_len[HALF_NAME_COUNT] = {0};
    out = PyMem_Malloc((size_t)props_len + 1);
    if (out == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t out_len = 0, i = 0;
    int first = 1;
    for (;;) {
        const unsigned char *sep = props_len > i ? memchr(props + i, 2, (size_t)(props_len - i)) : NULL;
        Py_ssize_t item_end = sep == NULL ? props_len : sep - props;
        const unsigned char *item = props + i;
        Py_ssize_t item_len = item_end - i;
        const unsigned char *eq = item_len > 0 ? memchr(item, 1, (size_t)item_len) : NULL;
        int name = eq == NULL ? -1 : half_name_index(item, eq - item);
        if (name >= 0 && found[name] == NULL) {
            found[name] = eq + 1;
            found_len[name] = item_end - (eq + 1 - props);
        }
        if (name < 0 || name >= HALF_DROPPED) {
            if (!first) out[out_len++] = 2;
            memcpy(out + out_len, item, (size_t)item_len);
            out_len += item_len;
            first = 0;
        }
        if (sep == NULL) break;
        i = item_end + 1;
    }
    kept = PyUnicode_DecodeUTF8((const char *)out, out_len, "strict");
    if (kept == NULL) goto done;
    long long queue_offset = (long long)get_u64(r + QUEUE_OFFSET_OFFSET);
    long long identity = queue_offset;
    if (found[3] != NULL && found_len[3] > 0 && found_len[3] <= 18) {
        long long v = 0;
        Py_ssize_t k = 0;
        for (; k < found_len[3] && found[3][k] >= '0' && found[3][k] <= '9'; k++) v = v * 10 + (found[3][k] - '0');
        if (k == found_len[3]) identity = v;
    }
    int wait = !(found[6] != NULL && found_len[6] == 5 && memcmp(found[6], "false", 5) == 0);
    PyObject *empty = PyUnicode_New(0, 0);
    if (empty == NULL) goto done;
    result = Py_BuildValue(
        "(NLLiiLy#iONONNNLNNONN)",
        PyUnicode_DecodeUTF8((const char *)r + topic_at, topic_len, "strict"), queue_offset,
        (long long)get_u64(r + PHYSICAL_OFFSET_OFFSET), (int)sys_flag, (int)(int32_t)get_u32(r + FLAG_OFFSET),
        (long long)get_u64(r + BORN_TIMESTAMP_OFFSET), (const char *)r + BORN_HOST_OFFSET, born_len,
        (int)(int32_t)get_u32(r + STORE_TIMESTAMP_AT(born_len) + STORE_TIMESTAMP_BYTES + store_len), body,
        PyUnicode_DecodeUTF8((const char *)props, props_len, "strict"), raw_obj, kept,
        utf8_or(found[0], found_len[0], empty), utf8_or(found[1], found_len[1], empty), identity,
        utf8_or(found[4], found_len[4], empty), utf8_or(found[5], found_len[5], Py_None), wait ? Py_True : Py_False,
        utf8_or(found[7], found_len[7], empty), utf8_or(found[8], found_len[8], empty));
    Py_DECREF(empty);
    kept = NULL; /* stolen by "N" (also on failure) */
    goto done;
malformed:
    PyErr_SetString(PyExc_ValueError, "malformed v1 record");
    return NULL;
done:
    PyMem_Free(out);
    Py_XDECREF(crc);
    Py_XDECREF(kept);
    Py_XDECREF(body);
    return result;
}

static PyMethodDef methods[] = {
    {"append_records", append_records, METH_VARARGS, append_records_doc},
    {"index_messages", index_messages, METH_VARARGS, index_messages_doc},
    {"scan_batch", scan_batch, METH_VARARGS, scan_batch_doc},
    {"append_batch", append_batch, METH_VARARGS, append_batch_doc},
    {"index_records", index_records, METH_VARARGS, index_records_doc},
    {"reput_records", reput_records, METH_VARARGS, reput_records_doc},
    {"half_record", half_record, METH_VARARGS, half_record_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "mq_broker.store._native",
    "The CommitLog's batch append loop and the index entries of a batch in C.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *zlib = PyImport_ImportModule("zlib");
    if (zlib == NULL) return NULL;
    crc32_func = PyObject_GetAttrString(zlib, "crc32");
    Py_DECREF(zlib);
    if (crc32_func == NULL) return NULL;
#define INTERN(var, text) \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL;
    INTERN(s_topic, "topic")
    INTERN(s_queue_id, "queue_id")
    INTERN(s_body, "body")
    INTERN(s_properties_string, "properties_string")
    INTERN(s_flag, "flag")
    INTERN(s_sys_flag, "sys_flag")
    INTERN(s_born_ts, "born_timestamp_ms")
    INTERN(s_born_host, "born_host")
    INTERN(s_reconsume_times, "reconsume_times")
    INTERN(s_tags_code, "tags_code")
    INTERN(s_wrote_offset, "wrote_offset")
    INTERN(s_store_ts, "store_timestamp_ms")
#undef INTERN
    return PyModule_Create(&module);
}
