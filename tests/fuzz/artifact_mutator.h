// The structure-aware mutator of the fuzz_artifact target: mutates a .kiln file (layout:
// artifact/kiln.fbs) field by field, so that most mutants get past the FlatBuffers verifier and
// the file-size and layout checks and reach the meaning checks of the reader, ir::verify_graph
// and the reference interpreter.
//
// A file whose parts parse is re-serialized with every scalar field present (FlatBuffers omits
// fields at their default value, which could then never be mutated in place), then one of:
//   - a scalar field or a scalar vector element (an enum, a dim size, a node input id, a kernel
//     argument, a plan buffer's value or slot, an offset, an attribute) gets an interesting
//     value: 0, +-1, a neighbour, an extreme, another value of the same type from the file;
//   - a string (a symbol, a name, a format) is replaced by (a prefix of) another string of the
//     file, emptied, or byte-mutated, in place and never longer;
//   - a vector loses its last element;
//   - the data segment (the constants' bytes) is byte-mutated;
//   - the file header's data or model placement is perturbed.
// Model mutations are in place: FlatBuffers' reflection resizing (SetString, ResizeAnyVector)
// wrote out of bounds on re-packed models.
// The parts are then laid out again (header, data, model, 64-byte aligned) with the header's
// offsets and the model's file_size made consistent. Inputs that do not parse, and one mutation
// in eight, get libFuzzer's byte-level mutation instead.
//
// Thread-safety: a pure function of its arguments (libFuzzer calls it from one thread).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::fuzz {

// libFuzzer's LLVMFuzzerCustomMutator contract: mutates data[0, size) in place, returns the new
// size (at most max_size); `seed` drives every random choice.
size_t mutate_artifact(uint8_t* data, size_t size, size_t max_size, unsigned int seed);

}  // namespace kiln::fuzz
