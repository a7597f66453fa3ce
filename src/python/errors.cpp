// bitgrad's errors as Python exceptions, with the CLI's messages: bitgrad.Error is the base;
// bad input (shapes, dtypes, values, configurations) is also a ValueError, misuse of autograd
// a RuntimeError, a missing file or directory a FileNotFoundError.
#include "bitgrad/dist.hpp"
#include "bitgrad/train.hpp"
#include "python/bind.hpp"

namespace bitgrad::python {
namespace {
struct Classes {
  PyObject *input = nullptr, *state = nullptr, *not_found = nullptr, *interrupted = nullptr, *base = nullptr;
} g_classes;
}  // namespace

void set_python_error(std::exception_ptr p) {
  try {
    std::rethrow_exception(p);
  } catch (const train::Interrupted& e) {
    PyErr_SetString(g_classes.interrupted, e.what());
  } catch (const StateError& e) {
    PyErr_SetString(g_classes.state, e.what());
  } catch (const NotFoundError& e) {
    PyErr_SetString(g_classes.not_found, e.what());
  } catch (const Error& e) {
    PyErr_SetString(g_classes.input, e.what());
  } catch (const py::error_already_set& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "bitgrad: unknown C++ exception");
  }
}

void init_errors(py::module_& m) {
  static py::exception<Error> base(m, "Error", PyExc_Exception);
  base.doc() = "Base of every error bitgrad raises; the message is the one the CLI prints.";
  auto derived = [&m](const char* name, PyObject* builtin, const char* doc) {
    py::object cls = py::reinterpret_steal<py::object>(
        PyErr_NewExceptionWithDoc((std::string("bitgrad.") + name).c_str(), doc, py::make_tuple(base, py::handle(builtin)).ptr(), nullptr));
    if (!cls) throw py::error_already_set();
    m.attr(name) = cls;
    return cls;
  };
  static py::object input_error = derived("InputError", PyExc_ValueError,
                                          "Bad input: a shape, dtype, value or configuration that bitgrad cannot use (also a ValueError).");
  static py::object state_error = derived("AutogradError", PyExc_RuntimeError,
                                          "Misuse of autograd: a freed graph, backward of what needs no gradient, a saved tensor "
                                          "modified in place (also a RuntimeError).");
  static py::object not_found = derived("NotFoundError", PyExc_FileNotFoundError,
                                        "A file or directory that does not exist (also a FileNotFoundError).");
  // not a bitgrad.Error (an Exception): `except Exception` must not swallow a Ctrl-C
  static py::object interrupted = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(
      "bitgrad.Interrupted", "Training stopped by a signal after writing a checkpoint (a KeyboardInterrupt); continue with "
      "bitgrad.train(config, resume=out_dir).", PyExc_KeyboardInterrupt, nullptr));
  if (!interrupted) throw py::error_already_set();
  m.attr("Interrupted") = interrupted;
  g_classes = {input_error.ptr(), state_error.ptr(), not_found.ptr(), interrupted.ptr(), base.ptr()};
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const train::Interrupted& e) {
      PyErr_SetString(interrupted.ptr(), e.what());
    } catch (const StateError& e) {
      PyErr_SetString(state_error.ptr(), e.what());
    } catch (const NotFoundError& e) {
      PyErr_SetString(not_found.ptr(), e.what());
    } catch (const Error& e) {
      PyErr_SetString(input_error.ptr(), e.what());
    }
  });
}

}  // namespace bitgrad::python
