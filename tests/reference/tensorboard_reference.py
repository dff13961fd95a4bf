"""Reads a folder of TensorBoard event files the way TensorBoard does and
prints what it found as JSON, for tests/reference/tensorboard_reference_test.cpp.

Three independent readings, all of which must agree:
  1. the raw TFRecord framing, parsed here with a CRC-32C written from its
     definition (reflected polynomial 0x82F63B78), every length and data CRC
     checked, and the file must end exactly at a record boundary;
  2. tensorboard's own record reader and masked CRC (PyRecordReader_New from
     tensorboard.compat.tensorflow_stub, used when TensorFlow is absent; it
     raises on a bad CRC) through RawEventFileLoader, which must yield the
     same records as (1) (it swallows a DataLossError as "truncated", so a
     missing record is how a CRC failure shows there), and
     LegacyEventFileLoader, which parses them into Event protos;
  3. EventAccumulator (size_guidance 0: keep everything): scalars, the text
     tensors and their plugin name, with its restart purging applied.

Non-finite floats are printed as the strings "nan", "inf", "-inf" (JSON has none).
Usage: tensorboard_reference.py FOLDER
Exits 1 with a message on any framing or CRC error.
"""
import json
import math
import os
import struct
import sys

from tensorboard.backend.event_processing import event_accumulator, event_file_loader
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub import pywrap_tensorflow
from tensorboard.util import tensor_util


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def fail(message):
    print(message)  # on stdout, which the C++ test captures
    sys.exit(1)


def read_records(path):
    """The records up to the first framing or CRC problem, and that problem (or None)."""
    data = open(path, "rb").read()
    records, pos = [], 0
    while pos < len(data):
        if pos + 12 > len(data):
            return records, f"{path}: truncated header at byte {pos}"
        header = data[pos : pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[pos + 8 : pos + 12])
        if length_crc != masked(crc32c(header)):
            return records, f"{path}: bad length CRC at byte {pos}"
        if length_crc != pywrap_tensorflow.masked_crc32c(header):
            return records, f"{path}: tensorboard's masked_crc32c disagrees at byte {pos}"
        body_end = pos + 12 + length
        if body_end + 4 > len(data):
            return records, f"{path}: truncated record at byte {pos}"
        body = data[pos + 12 : body_end]
        (body_crc,) = struct.unpack("<I", data[body_end : body_end + 4])
        if body_crc != masked(crc32c(body)):
            return records, f"{path}: bad data CRC at byte {pos}"
        records.append(body)
        pos = body_end + 4
    return records, None


def number(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def main():
    folder = sys.argv[1]
    assert crc32c(b"123456789") == 0xE3069283  # the CRC catalogue's check value
    names = sorted(n for n in os.listdir(folder) if "tfevents" in n)
    out = {"files": names, "records": 0, "events": [], "scalars": {}, "texts": {}, "text_plugin": {}}
    for name in names:
        path = os.path.join(folder, name)
        records, problem = read_records(path)
        raw = list(event_file_loader.RawEventFileLoader(path).Load())
        if problem:
            fail(f"{problem}; tensorboard's reader yielded {len(raw)} records, {len(records)} precede the bad one")
        if raw != records:
            fail(f"{path}: tensorboard read {len(raw)} records, the framing holds {len(records)}, or they differ")
        loaded = list(event_file_loader.LegacyEventFileLoader(path).Load())
        out["records"] += len(records)
        for event in loaded:
            kind = event.WhichOneof("what")
            entry = {"file": name, "step": event.step, "wall_time": event.wall_time, "kind": kind}
            if kind == "file_version":
                entry["file_version"] = event.file_version
            elif kind == "session_log":
                entry["status"] = event.session_log.status
            elif kind == "summary":
                entry["tags"] = [v.tag for v in event.summary.value]
            out["events"].append(entry)

    acc = event_accumulator.EventAccumulator(folder, size_guidance={event_accumulator.SCALARS: 0,
                                                                     event_accumulator.TENSORS: 0})
    acc.Reload()
    tags = acc.Tags()
    for tag in tags["scalars"]:
        out["scalars"][tag] = [[s.step, s.wall_time, number(s.value)] for s in acc.Scalars(tag)]
    for tag in tags["tensors"]:
        texts = []
        for t in acc.Tensors(tag):
            array = tensor_util.make_ndarray(t.tensor_proto)
            if array.shape != ():
                fail(f"text tensor {tag} has shape {array.shape}, expected a scalar")
            texts.append([t.step, t.wall_time, array.item().decode("utf-8")])
        out["texts"][tag] = texts
        out["text_plugin"][tag] = acc.SummaryMetadata(tag).plugin_data.plugin_name
    print(json.dumps(out))


if __name__ == "__main__":
    main()
