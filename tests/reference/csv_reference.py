"""Reads logger/csv's files with Python's csv module (csv.DictReader, the
default "excel" dialect, files opened with newline="" as the csv docs
require) and prints them as JSON for tests/reference/csv_logger_reference_test.cpp.

Numbers are parsed with int() and float(): a value that does not parse fails
the script. Non-finite floats print as "nan", "inf", "-inf" (JSON has none).
Usage: csv_reference.py METRICS_CSV [TEXT_CSV]
"""
import csv
import json
import math
import sys


def number(text):
    x = float(text)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    for r in rows:
        if None in r or None in r.values():
            sys.exit(f"{path}: a row's field count differs from the header's: {r}")
    return reader.fieldnames, rows


def main():
    out = {}
    fields, rows = read(sys.argv[1])
    out["metrics_fields"] = fields
    out["metrics"] = [
        {"step": int(r["step"]), "phase": r["phase"], "time": number(r["time"]), "name": r["name"],
         "value": number(r["value"])}
        for r in rows
    ]
    if len(sys.argv) > 2:
        fields, rows = read(sys.argv[2])
        out["text_fields"] = fields
        out["texts"] = [{"step": int(r["step"]), "time": number(r["time"]), "tag": r["tag"], "text": r["text"]}
                        for r in rows]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
