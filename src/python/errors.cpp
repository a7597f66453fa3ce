// bitgrad's errors as Python exceptions, with the CLI's messages: bitgrad.Error is the base;
// bad input (shapes, dtypes, values, configurations) is also a ValueError, misuse of autograd
// a RuntimeError, a missing file or directory a FileNotFoundError.
#include "bitgrad/dist.hpp"
#include "bitgrad/train.hpp"
#include "python/bind.hpp"

namespace bitgrad::python {

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
  static py::object interrupted = derived("Interrupted", PyExc_KeyboardInterrupt,
                                          "Training stopped by a signal after writing a checkpoint; the message says how to resume.");
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
