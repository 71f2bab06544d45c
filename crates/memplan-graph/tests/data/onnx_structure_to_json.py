# How resnet18.json and mobilenet_v2.json were made (a test-data generator, not an importer):
#   python3 onnx_structure_to_json.py MODEL.onnx MODEL.tensors.csv > MODEL.json
# It reads only the graph structure from the ONNX protobuf (nodes with their inputs and
# outputs, graph inputs and outputs, initialiser names, dtypes and dims). Activation dtypes
# and shapes are copied from the reference tensors.csv, since there is no shape inference
# here; outputs of Constant nodes become kind "constant" with a placeholder INT64 of 8
# bytes (they are not in the arena). So these files test lifetimes, not shapes.
import sys, json, csv
def varint(b, i):
    r = s = 0
    while True:
        c = b[i]; i += 1; r |= (c & 0x7f) << s; s += 7
        if c < 0x80: return r, i
def fields(b):
    i = 0; out = []
    while i < len(b):
        k, i = varint(b, i); f, w = k >> 3, k & 7
        if w == 0: v, i = varint(b, i)
        elif w == 1: v = b[i:i+8]; i += 8
        elif w == 5: v = b[i:i+4]; i += 4
        elif w == 2:
            n, i = varint(b, i); v = b[i:i+n]; i += n
        else: raise Exception("wire %d" % w)
        out.append((f, w, v))
    return out
DT = {1:"FLOAT",2:"UINT8",3:"INT8",4:"UINT16",5:"INT16",6:"INT32",7:"INT64",8:"STRING",9:"BOOL",10:"FLOAT16",11:"DOUBLE",12:"UINT32",13:"UINT64",16:"BFLOAT16"}
model = open(sys.argv[1], "rb").read()
ref = {r["name"]: r for r in csv.DictReader(open(sys.argv[2]))}
graph = [v for f, w, v in fields(model) if f == 7][0]
nodes, inits, ins, outs = [], {}, [], []
for f, w, v in fields(graph):
    if f == 1:
        n = {"inputs": [], "outputs": [], "name": "", "op": "", "domain": ""}
        for g, _, x in fields(v):
            if g == 1: n["inputs"].append(x.decode())
            elif g == 2: n["outputs"].append(x.decode())
            elif g == 3: n["name"] = x.decode()
            elif g == 4: n["op"] = x.decode()
            elif g == 7: n["domain"] = x.decode()
        nodes.append(n)
    elif f == 5:
        dims, dt, name = [], 1, ""
        for g, gw, x in fields(v):
            if g == 1:
                if gw == 2:
                    j = 0
                    while j < len(x): d, j = varint(x, j); dims.append(d)
                else: dims.append(x)
            elif g == 2: dt = x
            elif g == 8: name = x.decode()
        inits[name] = (DT[dt], dims)
    elif f == 11:
        ins.append([x for g, _, x in fields(v) if g == 1][0].decode())
    elif f == 12:
        outs.append([x for g, _, x in fields(v) if g == 1][0].decode())
values, seen = [], set()
def add(d):
    if d["name"] not in seen: seen.add(d["name"]); values.append(d)
for name, (dt, dims) in inits.items():
    add({"name": name, "dtype": dt, "shape": dims, "kind": "weight"})
gin = [i for i in ins if i not in inits]
def refval(name, kind=None):
    r = ref[name]
    shape = [int(x) for x in r["shape"].split("x")] if r["shape"] else []
    d = {"name": name, "dtype": r["dtype"], "shape": shape}
    if kind: d["kind"] = kind
    return d
for i in gin: add(refval(i, "input"))
for idx, n in enumerate(nodes):
    if not n["name"]: n["name"] = "node_%d" % idx
    for o in n["outputs"]:
        if not o: continue
        if n["op"] == "Constant": add({"name": o, "dtype": "INT64", "bytes": 8, "kind": "constant"})
        else: add(refval(o))
jn = []
for n in nodes:
    d = {"name": n["name"], "op": n["op"], "inputs": n["inputs"], "outputs": n["outputs"]}
    if n["domain"]: d["domain"] = n["domain"]
    jn.append(d)
json.dump({"name": sys.argv[1].split("/")[-1].split(".")[0], "inputs": gin, "outputs": outs, "values": values, "nodes": jn}, sys.stdout, indent=None, separators=(",", ":"))
