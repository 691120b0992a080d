"""Writes the recorded vectors the engine-events tests read (the suite itself needs no Python).

Run with Debian's python3-msgpack and python3-cbor2 (apt-get install python3-msgpack python3-cbor2):
    python3 generate.py
It is written from vLLM's published definitions, independently of the TypeScript under test:
- block hashes: sha256_cbor(x) = hashlib.sha256(cbor2.dumps(x, canonical=True)).digest(); a block's
  hash is sha256_cbor((parent, tuple(token_ids), extra_keys)), the first block's parent NONE_HASH =
  sha256_cbor(PYTHONHASHSEED) (vllm/v1/core/kv_cache_utils.py, vllm/utils/hashing.py); the integer
  form is the digest's last 8 bytes, big-endian (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES).
- event frames: [topic, 8-byte big-endian seq, msgpack payload] (vllm/distributed/kv_events.py). The
  payloads are written with python msgpack the way msgspec writes vLLM's structs: current vLLM as maps
  ("type" first, fields in declaration order, defaulted fields omitted), older vLLM as positional
  arrays (tag first), SGLang as a positional batch [ts, events, attn_dp_rank] with signed hashes.
"""

import hashlib
import json

import cbor2
import msgpack


def sha256_cbor(value):
    return hashlib.sha256(cbor2.dumps(value, canonical=True)).digest()


def chain(tokens, block_size, seed, extra_keys=None, parent=None):
    none_hash = sha256_cbor(seed)
    out = []
    prev = parent if parent else none_hash
    for i in range(len(tokens) // block_size):
        keys = extra_keys[i] if extra_keys and i < len(extra_keys) else None
        prev = sha256_cbor((prev, tuple(tokens[i * block_size:(i + 1) * block_size]), keys))
        out.append(prev)
    return out


def int_hash(digest):
    return int.from_bytes(digest, "big") & ((1 << 64) - 1)


def tagged(value):
    """JSON can hold neither bytes nor integers beyond 2^53 exactly: write them tagged."""
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return {"int": str(value)}
    return [tagged(v) for v in value]


def hash_vectors():
    cases = []
    def case(name, tokens, block_size, seed, extra_keys=None, parent=None):
        digests = chain(tokens, block_size, seed, extra_keys, parent)
        cases.append({
            "name": name,
            "tokens": tokens,
            "blockSize": block_size,
            "seed": seed,
            "extraKeys": tagged(extra_keys) if extra_keys else None,
            "parent": parent.hex() if parent else None,
            "noneHash": sha256_cbor(seed).hex(),
            "hashes": [d.hex() for d in digests],
            "intHashes": [str(int_hash(d)) for d in digests],
        })
    case("four blocks of 4, seed 0", list(range(16)), 4, "0")
    case("large token ids, seed 42", [0, 23, 24, 255, 256, 65535, 65536, 151643, 4294967295, 1, 2, 3], 4, "42")
    case("block size 16, seed 0", [(i * 7919) % 151936 for i in range(64)], 16, "0")
    case("extra keys: lora name, cache salt, mm hash and offset", list(range(100, 108)), 4, "0",
         extra_keys=[["my-lora", "salt-1", ["mm-hash-abc", 0]], ["my-lora"]])
    case("extra keys with negative and 64-bit ints and bytes", list(range(8)), 4, "7",
         extra_keys=[[-1, -24, -25, -256, -65537, 2**63, b"\x00\x01"], None])
    case("continuing a parent", list(range(8)), 4, "0", parent=bytes(range(32)))
    case("empty seed", [5, 6, 7, 8], 4, "")
    return cases


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True)


def hash_json(h):
    return ("hex:" + h.hex()) if isinstance(h, bytes) else str(h)


def stored_map(e):
    m = {"type": "BlockStored", "block_hashes": e["block_hashes"], "parent_block_hash": e["parent_block_hash"],
         "token_ids": e["token_ids"], "block_size": e["block_size"], "lora_id": e["lora_id"],
         "medium": e["medium"], "lora_name": e["lora_name"]}
    for key in ("extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window"):
        if e.get(key) is not None:
            m[key] = e[key]
    return m


def stored_array(e, fields):
    return ["BlockStored"] + [e.get(f) for f in fields]


STORED_FIELDS = ["block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium",
                 "lora_name", "extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window"]


def expect_event(e):
    if e["type"] == "AllBlocksCleared":
        return {"type": "AllBlocksCleared"}
    out = {"type": e["type"], "blockHashes": [hash_json(h) for h in e["block_hashes"]],
           "medium": e.get("medium"), "groupIdx": e.get("group_idx")}
    if e["type"] == "BlockStored":
        out.update({"parentBlockHash": None if e["parent_block_hash"] is None else hash_json(e["parent_block_hash"]),
                    "tokenIds": e["token_ids"], "blockSize": e["block_size"], "loraId": e["lora_id"],
                    "loraName": e.get("lora_name"), "extraKeys": e.get("extra_keys"),
                    "kvCacheSpecKind": e.get("kv_cache_spec_kind"),
                    "kvCacheSpecSlidingWindow": e.get("kv_cache_spec_sliding_window")})
    return out


def frame(topic, seq, payload):
    return [topic.encode().hex(), seq.to_bytes(8, "big").hex(), payload.hex()]


def streams():
    # The first run of 16 token ids from 1000 up whose integer hashes have at least two above 2^63.
    base = 1000
    while sum(int_hash(d) >= 2**63 for d in chain(list(range(base, base + 16)), 4, "0")) < 2:
        base += 1
    tokens = list(range(base, base + 16))
    digests = chain(tokens, 4, "0")
    ints = [int_hash(d) for d in digests]
    above = [h for h in ints if h >= 2**63]
    events_bytes = [
        {"type": "BlockStored", "block_hashes": digests[:2], "parent_block_hash": None, "token_ids": tokens[:8],
         "block_size": 4, "lora_id": None, "medium": "GPU", "lora_name": None},
        {"type": "BlockStored", "block_hashes": digests[2:], "parent_block_hash": digests[1], "token_ids": tokens[8:],
         "block_size": 4, "lora_id": 3, "medium": "CPU", "lora_name": "adapter-a",
         "extra_keys": [["adapter-a"], None], "group_idx": 1, "kv_cache_spec_kind": "sliding_window",
         "kv_cache_spec_sliding_window": 4096},
        {"type": "BlockRemoved", "block_hashes": [digests[3]], "medium": "GPU", "group_idx": 0},
        {"type": "AllBlocksCleared"},
    ]
    events_ints = [
        {"type": "BlockStored", "block_hashes": ints, "parent_block_hash": None, "token_ids": tokens,
         "block_size": 4, "lora_id": None, "medium": "GPU", "lora_name": None},
        {"type": "BlockRemoved", "block_hashes": [2**64 - 1, 2**63, 0], "medium": None},
    ]
    out = {"tokens": tokens, "seed": "0", "blockSize": 4, "intHashesAbove2To63": [str(h) for h in above],
           "vllmMap": [], "vllmArray": [], "sglang": [], "malformed": []}
    batches = [(1733300000.25, events_bytes, 0), (1733300001.5, events_ints, None)]
    for seq, (ts, evs, rank) in enumerate(batches):
        body = {"ts": ts, "events": [stored_map(e) if e["type"] == "BlockStored" else
                                     ({"type": e["type"], **{k: v for k, v in e.items() if k != "type" and v is not None}})
                                     for e in evs]}
        if rank is not None:
            body["data_parallel_rank"] = rank
        out["vllmMap"].append({"frames": frame("kv-events", seq, pack(body)), "ts": ts, "rank": rank,
                               "events": [expect_event(e) for e in evs]})
    # Older vLLM: positional arrays, fewer BlockStored fields (no lora_name and after), rank always written.
    old_fields = STORED_FIELDS[:6]
    for seq, (ts, evs, rank) in enumerate(batches):
        arr = []
        exp = []
        for e in evs:
            if e["type"] == "BlockStored":
                arr.append(stored_array(e, old_fields))
                exp.append(expect_event({k: v for k, v in e.items() if k in ["type"] + old_fields}))
            elif e["type"] == "BlockRemoved":
                arr.append(["BlockRemoved", e["block_hashes"], e.get("medium")])
                exp.append(expect_event({k: v for k, v in e.items() if k != "group_idx"}))
            else:
                arr.append(["AllBlocksCleared"])
                exp.append(expect_event(e))
        out["vllmArray"].append({"frames": frame("", seq, pack([ts, arr, rank])), "ts": ts, "rank": rank,
                                 "events": exp})
    signed = [h - 2**64 if h >= 2**63 else h for h in ints]
    sg_events = [
        {"type": "BlockStored", "block_hashes": signed, "parent_block_hash": None, "token_ids": tokens,
         "block_size": 4, "lora_id": None, "medium": "CPU_PINNED"},
        {"type": "BlockRemoved", "block_hashes": [-1, -(2**63), 5], "medium": "GPU"},
    ]
    sg_maps = [{k: v for k, v in e.items() if v is not None or k in ("parent_block_hash", "lora_id")}
               for e in sg_events]
    out["sglang"].append({"frames": frame("", 0, pack([1733300002.0, sg_maps, 2])), "ts": 1733300002.0, "rank": 2,
                          "events": [expect_event(e) for e in sg_events]})
    def bad(reason, payload):
        out["malformed"].append({"reason": reason, "payload": payload.hex()})
    bad("not msgpack", b"\xc1\x00")
    bad("truncated", pack([1.0, [stored_map(events_bytes[0])]])[:-5])
    bad("batch is a string", pack("hello"))
    bad("events not an array", pack([1.0, {"a": 1}]))
    bad("block_hashes missing", pack([1.0, [{"type": "BlockStored", "token_ids": [1], "block_size": 1}]]))
    bad("hash is a float", pack([1.0, [["BlockRemoved", [1.5], "GPU"]]]))
    bad("hash bytes of length 5", pack([1.0, [["BlockRemoved", [b"\x01\x02\x03\x04\x05"], "GPU"]]]))
    bad("token id negative", pack([1.0, [["BlockStored", [1], None, [-3], 1, None, "GPU"]]]))
    bad("trailing bytes", pack([1.0, []]) + b"\x00")
    return out


with open("vllm-block-hashes.json", "w") as f:
    json.dump(hash_vectors(), f, indent=1)
    f.write("\n")
with open("event-streams.json", "w") as f:
    json.dump(streams(), f, indent=1)
    f.write("\n")
