// Translation between Python objects and the framework-free C++ API: DLPack arrays become
// TensorViews, Status values become Python exceptions. No attention logic lives here.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <optional>

#include "flashattn/flashattn.h"

namespace flashattn_py {

namespace nb = nanobind;

// Inputs may be read-only (numpy views, jax buffers); outputs must be writable.
using InArray = nb::ndarray<nb::ro>;
using OutArray = nb::ndarray<>;

flashattn::TensorView to_view(const char* arg, const InArray& a);
flashattn::TensorView to_view(const char* arg, const OutArray& a);
flashattn::TensorView to_view(const char* arg, const std::optional<InArray>& a);
flashattn::TensorView to_view(const char* arg, const std::optional<OutArray>& a);

// Throws the Python exception matching a failed status; returns on success.
void raise_if_error(const flashattn::Status& status);

}  // namespace flashattn_py
