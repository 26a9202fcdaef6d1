#!/usr/bin/env python3
# Cross-check of mgtrain's TensorBoard event files with the real protobuf library (Debian's python3-protobuf):
# TensorFlow's Event/Summary messages declared here with their field numbers (event.proto, summary.proto; TensorBoard
# itself is not packaged in Debian), TFRecord framing with both masked CRC32Cs recomputed in Python. Every record must
# parse, re-encode to the same bytes, and the first must be file_version brain.Event:2. Prints 'ok <records>' and
# one line per scalar record: 'step tag=value ...'. Usage: tfevents_protobuf_check.py EVENT_FILE
import struct, sys
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
fdp = descriptor_pb2.FileDescriptorProto(name="ev.proto", package="tensorflow", syntax="proto3")
summ = fdp.message_type.add(name="Summary")
val = summ.nested_type.add(name="Value")
F = descriptor_pb2.FieldDescriptorProto
val.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
val.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL)
summ.field.add(name="value", number=1, type=F.TYPE_MESSAGE, type_name=".tensorflow.Summary.Value", label=F.LABEL_REPEATED)
ev = fdp.message_type.add(name="Event")
ev.field.add(name="wall_time", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
ev.field.add(name="step", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
ev.field.add(name="file_version", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
ev.field.add(name="summary", number=5, type=F.TYPE_MESSAGE, type_name=".tensorflow.Summary", label=F.LABEL_OPTIONAL)
pool = descriptor_pool.DescriptorPool(); pool.Add(fdp)
Event = message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName("tensorflow.Event"))
def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8): crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF
def masked(data):
    c = crc32c(data); return (((c >> 15) | (c << 17)) + 0xa282ead8) & 0xFFFFFFFF
assert crc32c(b"123456789") == 0xE3069283
raw = open(sys.argv[1], "rb").read(); at = 0; n = 0; records = []
while at < len(raw):
    (length,) = struct.unpack_from("<Q", raw, at); (lc,) = struct.unpack_from("<I", raw, at + 8)
    assert lc == masked(raw[at:at + 8]), "length crc"
    data = raw[at + 12:at + 12 + length]; (dc,) = struct.unpack_from("<I", raw, at + 12 + length)
    assert dc == masked(data), "data crc"
    e = Event(); e.ParseFromString(data)
    assert e.SerializeToString() == data, "re-encoding by protobuf differs"
    records.append(e)
    at += 12 + length + 4; n += 1
assert records and records[0].file_version == "brain.Event:2", "first record is not the file version"
print("ok", n)
for e in records[1:]:
    print(e.step, " ".join("%s=%r" % (v.tag, v.simple_value) for v in e.summary.value))
