// node cmake/relaxed_simd_opcodes.mjs <module.wasm | program.cjs>
//
// Rewrites two relaxed-SIMD instructions of Emscripten 3.1.6 (LLVM 14) to the opcodes the
// relaxed-SIMD standard settled on, in place:
//  - LLVM 14 emits the proposal's early encoding `f32x4.fma` (0xfd 0xaf 0x01), which today's
//    engines reject; the standard's `f32x4.relaxed_madd` (0xfd 0x85 0x02) takes the same operands
//    (a, b, c) and computes a·b + c, fused or not;
//  - LLVM 14 has no `i16x8.relaxed_dot_i8x16_i7x16_s` (0xfd 0x92 0x02): the code writes
//    `i8x16.relaxed_swizzle` in its place (cpu/simd128_int.h's dot_pairs_i8_u7), whose early
//    encoding (0xfd 0xa2 0x01) no engine runs either; both take two vectors and give one.
// All four encodings are three bytes, so nothing else in the module moves.
//
// Only instructions are rewritten: every function body is decoded instruction by instruction
// (the byte pattern may also occur inside immediates or data), and a body that does not decode
// to exactly its end stops the build, as does a module with no fma at all. A .js/.cjs file is an
// Emscripten -sSINGLE_FILE program: the module inside its base64 data URL is rewritten.
import { readFileSync, writeFileSync } from 'node:fs';

const file = process.argv[2];
if (!file) throw new Error('usage: relaxed_simd_opcodes.mjs <module.wasm | program.cjs>');
const singleFile = /\.c?js$/.test(file);
const DATA_URL = /data:application\/octet-stream;base64,([A-Za-z0-9+/=]+)/;
const program = singleFile ? readFileSync(file, 'utf8') : undefined;
const embedded = program?.match(DATA_URL);
if (singleFile && !embedded) throw new Error(`${file} holds no base64 wasm module`);
const bytes = embedded ? Buffer.from(embedded[1], 'base64') : readFileSync(file);

let pos = 0;
function u32() {
  let result = 0, shift = 0, b;
  do {
    b = bytes[pos++];
    result += (b & 0x7f) * 2 ** shift;
    shift += 7;
  } while (b & 0x80);
  return result;
}
const skipLeb = () => void u32(); // signed LEBs have the same length rule
const skip = (n) => void (pos += n);
const memarg = () => (skipLeb(), skipLeb());

// Immediates of the 0xfd (SIMD) instructions that have any; every other SIMD opcode,
// the relaxed ones included, has none.
function simdImmediates(op) {
  if (op <= 11 || op === 92 || op === 93) return memarg(); // loads, store, load32/64_zero
  if (op === 12 || op === 13) return skip(16); // v128.const, i8x16.shuffle
  if (op >= 21 && op <= 34) return skip(1); // extract/replace lane
  if (op >= 84 && op <= 91) return (memarg(), skip(1)); // load/store lane
}

function miscImmediates(op) {
  // 0xfc: saturating truncations (0-7) have none; bulk memory and tables do.
  if (op <= 7) return;
  if (op === 8) return (skipLeb(), skip(1)); // memory.init
  if (op === 9 || op === 13 || op >= 15) return skipLeb(); // data.drop, elem.drop, table.grow/size/fill
  if (op === 10) return skip(2); // memory.copy
  if (op === 11) return skip(1); // memory.fill
  if (op === 12 || op === 14) return (skipLeb(), skipLeb()); // table.init, table.copy
  throw new Error(`unknown 0xfc opcode ${op} at ${pos}`);
}

const VALTYPES = new Set([0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f]);

function instruction() {
  const op = bytes[pos++];
  if (op === 0x02 || op === 0x03 || op === 0x04) {
    if (bytes[pos] === 0x40 || VALTYPES.has(bytes[pos])) skip(1);
    else skipLeb(); // type index (s33)
  } else if (op === 0x0c || op === 0x0d || op === 0x10 || op === 0x12 || (op >= 0x20 && op <= 0x26) || op === 0xd2) {
    skipLeb();
  } else if (op === 0x0e) {
    const n = u32();
    for (let i = 0; i <= n; i++) skipLeb();
  } else if (op === 0x11 || op === 0x13) {
    skipLeb();
    skipLeb();
  } else if (op === 0x1c) {
    skip(u32());
  } else if (op >= 0x28 && op <= 0x3e) {
    memarg();
  } else if (op === 0x3f || op === 0x40 || op === 0xd0) {
    skip(1);
  } else if (op === 0x41 || op === 0x42) {
    skipLeb();
  } else if (op === 0x43) {
    skip(4);
  } else if (op === 0x44) {
    skip(8);
  } else if (op === 0xfc) {
    miscImmediates(u32());
  } else if (op === 0xfe) {
    if (u32() === 0x03) skip(1); // atomic.fence
    else memarg();
  } else if (op === 0xfd) {
    const at = pos;
    const simd = u32();
    if (simd === 0xaf && pos - at === 2) {
      bytes[at] = 0x85;
      bytes[at + 1] = 0x02;
      patched++;
    } else if (simd === 0xa2 && pos - at === 2) {
      bytes[at] = 0x92;
      bytes[at + 1] = 0x02;
      dots++;
    }
    simdImmediates(simd);
  } else if (op > 0xc4 && op !== 0xd1) {
    throw new Error(`unknown opcode 0x${op.toString(16)} at ${pos - 1}`);
  }
}

let patched = 0;
let dots = 0;
if (bytes.readUInt32LE(0) !== 0x6d736100) throw new Error(`${file} is not a wasm module`);
pos = 8;
while (pos < bytes.length) {
  const id = bytes[pos++];
  const size = u32();
  const end = pos + size;
  if (id === 10) {
    const bodies = u32();
    for (let f = 0; f < bodies; f++) {
      const bodyEnd = u32() + pos;
      const localGroups = u32();
      for (let i = 0; i < localGroups; i++) (skipLeb(), skip(1));
      while (pos < bodyEnd) instruction();
      if (pos !== bodyEnd || bytes[bodyEnd - 1] !== 0x0b) {
        throw new Error(`function body ${f} of ${file} did not decode to its end`);
      }
    }
  }
  pos = end;
}
if (patched === 0) throw new Error(`${file}: no f32x4.fma to rewrite (was it built with -mrelaxed-simd?)`);
writeFileSync(file, embedded ? program.replace(DATA_URL, `data:application/octet-stream;base64,${bytes.toString('base64')}`) : bytes);
console.log(`${file}: ${patched} f32x4.fma -> f32x4.relaxed_madd, ${dots} i8x16.relaxed_swizzle -> i16x8.relaxed_dot_i8x16_i7x16_s`);
