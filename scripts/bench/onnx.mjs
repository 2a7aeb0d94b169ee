// A minimal ONNX protobuf writer: just enough of onnx.proto (ModelProto, GraphProto, NodeProto,
// AttributeProto, TensorProto, ValueInfoProto) to build the bench's attention graphs, so the bench
// ships no model files and needs no protobuf library.

class Writer {
  constructor() {
    this.bytes = [];
  }
  varint(v) {
    let x = BigInt(v);
    if (x < 0n) x += 1n << 64n;
    do {
      let b = Number(x & 0x7fn);
      x >>= 7n;
      if (x) b |= 0x80;
      this.bytes.push(b);
    } while (x);
    return this;
  }
  tag(field, wire) {
    return this.varint((field << 3) | wire);
  }
  int(field, v) {
    return this.tag(field, 0).varint(v);
  }
  bytesField(field, data) {
    this.tag(field, 2).varint(data.length);
    for (const b of data) this.bytes.push(b);
    return this;
  }
  string(field, s) {
    return this.bytesField(field, new TextEncoder().encode(s));
  }
  message(field, writer) {
    return this.bytesField(field, writer.bytes);
  }
  done() {
    return new Uint8Array(this.bytes);
  }
}

const FLOAT = 1; // TensorProto.DataType.FLOAT
const INT32 = 6;
const ATTR = { INT: 2, INTS: 7 };

function valueInfo(name, dims, type = FLOAT) {
  const shape = new Writer();
  for (const d of dims) shape.message(1, new Writer().int(1, d));
  const tensorType = new Writer().int(1, type).message(2, shape);
  return new Writer().string(1, name).message(2, new Writer().message(1, tensorType));
}

function attribute(name, value) {
  const a = new Writer().string(1, name);
  if (Array.isArray(value)) {
    for (const v of value) a.int(8, v);
    a.int(20, ATTR.INTS);
  } else {
    a.int(3, value).int(20, ATTR.INT);
  }
  return a;
}

function node(opType, inputs, outputs, attributes = {}) {
  const n = new Writer();
  for (const i of inputs) n.string(1, i);
  for (const o of outputs) n.string(2, o);
  n.string(3, `${opType}_${outputs[0]}`).string(4, opType);
  for (const [k, v] of Object.entries(attributes)) n.message(5, attribute(k, v));
  return n;
}

function scalarInitializer(name, value) {
  const raw = new Uint8Array(new Float32Array([value]).buffer);
  return new Writer().int(2, FLOAT).string(8, name).bytesField(9, raw);
}

function model(graph, opsets) {
  const m = new Writer().int(1, 8).string(2, 'sdpa-web bench');
  for (const [domain, version] of opsets) m.message(8, new Writer().string(1, domain).int(2, version));
  return m.message(7, graph).done();
}

/**
 * softmax(Q·Kᵀ·scale)·V as plain ONNX ops (opset 17): Transpose(K) → MatMul → Mul(scale) →
 * Softmax(axis −1) → MatMul(·, V). Inputs q [BH, Lq, E], k [BH, Lk, E], v [BH, Lk, Ev]; output
 * o [BH, Lq, Ev]; scale 1/√E.
 */
export function attentionGraphModel({ B, H, Lq, Lk, E, Ev }) {
  const g = new Writer();
  g.message(1, node('Transpose', ['k'], ['kt'], { perm: [0, 2, 1] }));
  g.message(1, node('MatMul', ['q', 'kt'], ['s']));
  g.message(1, node('Mul', ['s', 'scale'], ['ss']));
  g.message(1, node('Softmax', ['ss'], ['p'], { axis: -1 }));
  g.message(1, node('MatMul', ['p', 'v'], ['o']));
  g.string(2, 'attention');
  g.message(5, scalarInitializer('scale', 1 / Math.sqrt(E)));
  const dims = { q: [Lq, E], k: [Lk, E], v: [Lk, Ev] };
  for (const name of ['q', 'k', 'v']) g.message(11, valueInfo(name, [B * H, ...dims[name]]));
  g.message(12, valueInfo('o', [B * H, Lq, Ev]));
  return model(g, [['', 17]]);
}

/**
 * One decode step as onnxruntime's com.microsoft GroupQueryAttention (past KV in, present out):
 * query [B, 1, Hq·E], key/value [B, 1, Hkv·E], past_key/past_value [B, Hkv, L, E] (a buffer of
 * L positions holding each sequence's past), seqlens_k [B] (each sequence's total length − 1),
 * total_sequence_length (scalar) → output [B, 1, Hq·E], present_key/present_value [B, Hkv, L, E].
 */
export function groupQueryAttentionModel({ B, Hq, Hkv, L, E }) {
  const g = new Writer();
  g.message(1, node('GroupQueryAttention', ['query', 'key', 'value', 'past_key', 'past_value', 'seqlens_k', 'total_sequence_length'], ['output', 'present_key', 'present_value'], { num_heads: Hq, kv_num_heads: Hkv }).string(7, 'com.microsoft'));
  g.string(2, 'decode');
  g.message(11, valueInfo('query', [B, 1, Hq * E]));
  g.message(11, valueInfo('key', [B, 1, Hkv * E]));
  g.message(11, valueInfo('value', [B, 1, Hkv * E]));
  g.message(11, valueInfo('past_key', [B, Hkv, L, E]));
  g.message(11, valueInfo('past_value', [B, Hkv, L, E]));
  g.message(11, valueInfo('seqlens_k', [B], INT32));
  g.message(11, valueInfo('total_sequence_length', [], INT32));
  g.message(12, valueInfo('output', [B, 1, Hq * E]));
  g.message(12, valueInfo('present_key', [B, Hkv, L, E]));
  g.message(12, valueInfo('present_value', [B, Hkv, L, E]));
  return model(g, [['', 17], ['com.microsoft', 1]]);
}
