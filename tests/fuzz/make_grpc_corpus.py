#!/usr/bin/python3
"""Writes the seed corpora of the gRPC fuzz targets: tests/fuzz/corpus/grpc_frame (gRPC
length-prefixed messages and grpc-message texts) and tests/fuzz/corpus/http2 (what a client
sends on one HTTP/2 connection, after the flags byte that fuzz_http2.c reads; the client
preface is added by the target unless flag bit 0 is set).

HTTP/2 frames (RFC 9113) and HPACK header blocks (RFC 7541, literal fields without indexing,
no Huffman coding) are built by hand here so the seeds need nothing but Python. Run it from
anywhere; it overwrites the seed files it owns and leaves other files in the directories.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = (
    0x0, 0x1, 0x3, 0x4, 0x6, 0x7, 0x8, 0x9)
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream & 0x7FFFFFFF) + payload


def hpack_int(value, prefix_bits, first=0):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = bytearray([first | limit])
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def hpack(headers):
    out = bytearray()
    for name, value in headers:
        name, value = name.encode(), value.encode()
        out += b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value
    return bytes(out)


def grpc_headers(path, ctype="application/grpc", method="POST"):
    h = [(":method", method), (":scheme", "http"), (":path", path),
         (":authority", "localhost")]
    if ctype is not None:
        h.append(("content-type", ctype))
    h += [("te", "trailers"), ("grpc-timeout", "1000m")]
    return hpack(h)


def msg(payload, compressed=0):
    return bytes([compressed]) + struct.pack(">I", len(payload)) + payload


def settings():
    return frame(SETTINGS, 0, 0, struct.pack(">HI", 0x4, 1 << 20))


def call(stream, path, body, **kw):
    return frame(HEADERS, END_HEADERS, stream, grpc_headers(path, **kw)) + \
        frame(DATA, END_STREAM, stream, body)


def pb_str(field, s):
    s = s.encode() if isinstance(s, str) else s
    return bytes([field << 3 | 2, len(s)]) + s


def pb_msg(field, body):
    return bytes([field << 3 | 2, len(body)]) + body


def pb_varint(field, v):
    return bytes([field << 3 | 0, v])


ALLOCATE = pb_msg(1, pb_str(1, "GPU-0") + pb_str(1, "GPU-1"))
REGISTER = pb_str(1, "v1beta1") + pb_str(2, "gpusched.sock") + pb_str(3, "example.com/gpu") + \
    pb_msg(4, pb_varint(2, 1))
PREFERRED = pb_msg(1, pb_str(1, "GPU-0") + pb_str(1, "GPU-1") + pb_str(2, "GPU-1") +
                   pb_varint(3, 1))
GET_POD = pb_str(1, "train-0") + pb_str(2, "ml")

HTTP2 = {
    "allocate": (0, settings() + call(1, "/v1beta1.DevicePlugin/Allocate", msg(ALLOCATE))),
    "options": (0, settings() + call(1, "/v1beta1.DevicePlugin/GetDevicePluginOptions", msg(b""))),
    "register": (0, settings() + call(1, "/v1beta1.Registration/Register", msg(REGISTER))),
    "preferred": (0, settings() + call(1, "/v1beta1.DevicePlugin/GetPreferredAllocation",
                                       msg(PREFERRED))),
    "prestart": (0, settings() + call(1, "/v1beta1.DevicePlugin/PreStartContainer",
                                      msg(pb_str(1, "GPU-0")))),
    "podresources": (0, settings() + call(1, "/v1.PodResourcesLister/List", msg(b"")) +
                     call(3, "/v1.PodResourcesLister/GetAllocatableResources", msg(b"")) +
                     call(5, "/v1.PodResourcesLister/Get", msg(GET_POD))),
    "list_and_watch_cancel": (2, settings() + call(1, "/v1beta1.DevicePlugin/ListAndWatch",
                                                   msg(b"")) +
                              frame(RST_STREAM, 0, 1, struct.pack(">I", 0x8))),
    "list_and_watch_finish": (6, settings() + frame(SETTINGS, ACK, 0) +
                              call(1, "/v1beta1.DevicePlugin/ListAndWatch", msg(b"")) +
                              frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 20))),
    "stream_many": (2, settings() + call(1, "/t.T/S", msg(b"\x07abc")) +
                    call(3, "/t.T/S", msg(b"\x3aabc")) +
                    frame(PING, 0, 0, b"12345678") +
                    frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 4096))),
    "split_body": (0, settings() +
                   frame(HEADERS, 0, 1, grpc_headers("/v1beta1.DevicePlugin/Allocate")[:20]) +
                   frame(CONTINUATION, END_HEADERS, 1,
                         grpc_headers("/v1beta1.DevicePlugin/Allocate")[20:]) +
                   frame(DATA, 0, 1, msg(ALLOCATE)[:3]) +
                   frame(DATA, 0, 1, msg(ALLOCATE)[3:9]) +
                   frame(DATA, END_STREAM, 1, msg(ALLOCATE)[9:])),
    "unknown_method": (0, settings() + call(1, "/x.Y/Z", msg(b"abc"))),
    "compressed": (0, settings() + call(1, "/v1beta1.DevicePlugin/Allocate",
                                        msg(ALLOCATE, compressed=1))),
    "truncated": (0, settings() + call(1, "/v1beta1.DevicePlugin/Allocate", msg(ALLOCATE)[:7])),
    "two_messages": (0, settings() + call(1, "/v1beta1.DevicePlugin/Allocate",
                                          msg(ALLOCATE) + msg(b""))),
    "huge_prefix": (0, settings() + call(1, "/v1beta1.DevicePlugin/Allocate",
                                         b"\x00\x7f\xff\xff\xff")),
    "bad_protobuf": (0, settings() + call(1, "/v1beta1.DevicePlugin/Allocate",
                                          msg(b"\x0a\x30\xff"))),
    "wrong_content_type": (0, settings() + call(1, "/v1beta1.DevicePlugin/Allocate", msg(b""),
                                                ctype="application/json")),
    "get_method": (0, settings() + call(1, "/v1beta1.DevicePlugin/Allocate", msg(b""),
                                        method="GET")),
    "goaway": (0, settings() + call(1, "/t.T/S", msg(b"\x01")) +
               frame(GOAWAY, 0, 0, struct.pack(">II", 0, 0))),
    "raw_bad_preface": (1, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
    "raw_preface_only": (1, PREFACE),
    "data_on_stream0": (0, settings() + frame(DATA, 0, 0, b"garbage!")),
}

FRAME = {
    "one": msg(ALLOCATE),
    "two": msg(b"") + msg(REGISTER),
    "compressed": msg(b"xyz", compressed=1),
    "bad_flag": b"\x02\x00\x00\x00\x01x",
    "too_long": b"\x00\x00\x01\x00\x00",
    "partial": msg(REGISTER)[:9],
    "percent_text": "50% \u00fcber %C3%BC %zz %4".encode(),
    "status": b"12",
}


def write(subdir, name, data):
    d = os.path.join(HERE, "corpus", subdir)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    for name, (flags, data) in HTTP2.items():
        write("http2", name, bytes([flags]) + data)
    for name, data in FRAME.items():
        write("grpc_frame", name, data)


if __name__ == "__main__":
    main()
