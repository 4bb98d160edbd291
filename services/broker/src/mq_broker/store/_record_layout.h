/*
 * Generated from mq_common/record_layout.py by `python -m mq_broker.store.record_layout_header`:
 * do not edit. The CommitLog message record, format v1 (big-endian): offsets and sizes in bytes, the magic
 * codes and the SYSFLAG bits that make a host field IPv6; record_layout.py's docstring has the table.
 */
#ifndef MQ_BROKER_STORE_RECORD_LAYOUT_H
#define MQ_BROKER_STORE_RECORD_LAYOUT_H

#define MESSAGE_MAGIC_CODE 0xDAA320A7u
#define BLANK_MAGIC_CODE 0xCBD43194u
#define TOTAL_SIZE_BYTES 4
#define MAGIC_CODE_BYTES 4
#define BODY_CRC_BYTES 4
#define QUEUE_ID_BYTES 4
#define FLAG_BYTES 4
#define QUEUE_OFFSET_BYTES 8
#define PHYSICAL_OFFSET_BYTES 8
#define SYS_FLAG_BYTES 4
#define BORN_TIMESTAMP_BYTES 8
#define STORE_TIMESTAMP_BYTES 8
#define RECONSUME_TIMES_BYTES 4
#define PREPARED_TRANSACTION_OFFSET_BYTES 8
#define BODY_LENGTH_BYTES 4
#define TOPIC_LENGTH_BYTES 1
#define PROPERTIES_LENGTH_BYTES 2
#define TOPIC_LENGTH_MAX 255
#define TOTAL_SIZE_OFFSET 0
#define MAGIC_CODE_OFFSET 4
#define BODY_CRC_OFFSET 8
#define QUEUE_ID_OFFSET 12
#define FLAG_OFFSET 16
#define QUEUE_OFFSET_OFFSET 20
#define PHYSICAL_OFFSET_OFFSET 28
#define SYS_FLAG_OFFSET 36
#define BORN_TIMESTAMP_OFFSET 40
#define BORN_HOST_OFFSET 48
#define HOST_PORT_BYTES 4
#define IPV4_HOST_BYTES 8
#define IPV6_HOST_BYTES 20
#define BORN_HOST_V6_FLAG 0x10
#define STORE_HOST_V6_FLAG 0x20
#define HOST_V6_FLAGS 0x30
#define HOST_V6_SHIFT 4
#define RECORD_FIXED_BYTES 75
#define MIN_RECORD_BYTES 91
#define END_FILE_MIN_BLANK_LENGTH 8

#endif
