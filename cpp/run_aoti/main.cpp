// run_aoti: load an AOTInductor package (.pt2) and run it from C++, with no Python anywhere.
//
//   run_aoti [--load-library LIB.so]... [--threads N] [--repeat N] PACKAGE.pt2 INPUTS.pt OUTPUTS.pt
//
// A package that calls custom operators (torchvision::nms, say) runs only where their kernels are
// registered: --load-library opens each library first (dlopen), which registers its operators.
//
// INPUTS.pt holds the program's inputs, flattened, as a list of tensors written by Python's
// torch.save (a service would fill the tensors from its own decoded images instead). OUTPUTS.pt
// receives the flattened outputs, written with torch::pickle_save so Python's torch.load reads it.
// --threads sets libtorch's intra-op thread count; --repeat times N more runs after the first and
// prints their median and minimum.
//
// Exit codes: 0 ran, 2 usage, 3 the package did not load, 4 the inputs file did not load,
// 5 the model refused the inputs (wrong count, dtype, shape, size outside the range or memory layout),
// 6 an operator library did not load.
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

namespace {

constexpr int kUsage = 2, kBadPackage = 3, kBadInputs = 4, kRefused = 5, kBadLibrary = 6;
constexpr const char* kUsageText =
    "usage: run_aoti [--load-library LIB.so]... [--threads N] [--repeat N] PACKAGE.pt2 INPUTS.pt OUTPUTS.pt";

// A positive count from the command line, or -1.
int parse_count(const std::string& text) {
  if (text.empty() || text.size() > 6 || !std::all_of(text.begin(), text.end(), ::isdigit)) return -1;
  int value = std::stoi(text);
  return value > 0 ? value : -1;
}

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// c10::Error::what() carries a C++ backtrace; the first line is the message a reader needs.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

int fail(int code, const std::string& what, const std::string& hint) {
  std::cerr << "run_aoti: " << what << "\n  " << hint << std::endl;
  return code;
}

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

// The inputs file: a list (or tuple) of tensors, or one tensor.
std::vector<at::Tensor> load_inputs(const std::string& path) {
  c10::IValue value = torch::pickle_load(read_bytes(path));
  std::vector<at::Tensor> tensors;
  if (value.isTensor()) {
    tensors.push_back(value.toTensor());
  } else if (value.isTensorList()) {
    for (const at::Tensor& t : value.toTensorVector()) tensors.push_back(t);
  } else if (value.isList() || value.isTuple()) {
    auto items = value.isList() ? value.toListRef().vec() : value.toTupleRef().elements().vec();
    for (const c10::IValue& item : items) {
      if (!item.isTensor()) throw std::runtime_error("an item of the list is a " + item.tagKind() + ", not a tensor");
      tensors.push_back(item.toTensor());
    }
  } else {
    throw std::runtime_error("it holds a " + value.tagKind() + ", not a list of tensors");
  }
  return tensors;
}

std::string shape_of(const at::Tensor& t) {
  std::string text = "[";
  for (int64_t d = 0; d < t.dim(); ++d) text += (d ? ", " : "") + std::to_string(t.size(d));
  return text + "] " + std::string(c10::toString(t.scalar_type()));
}

std::string strides_of(const at::Tensor& t) {
  std::string text = "[";
  for (int64_t d = 0; d < t.dim(); ++d) text += (d ? ", " : "") + std::to_string(t.stride(d));
  return text + "]";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> libraries, positional;
  int threads = 0, repeat = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--load-library") {
      if (i + 1 == argc) return fail(kUsage, "--load-library needs a path", kUsageText);
      libraries.push_back(argv[++i]);
    } else if (arg == "--threads" || arg == "--repeat") {
      int count = i + 1 < argc ? parse_count(argv[i + 1]) : -1;
      if (count < 0) return fail(kUsage, arg + " needs a positive whole number", kUsageText);
      (arg == "--threads" ? threads : repeat) = count;
      ++i;
    } else if (arg.rfind("--", 0) == 0) {
      return fail(kUsage, "unknown option " + arg, kUsageText);
    } else {
      positional.push_back(arg);
    }
  }
  if (positional.size() != 3) {
    return fail(kUsage, "expected 3 paths (package, inputs, outputs), got " + std::to_string(positional.size()),
                kUsageText);
  }
  const std::string package = positional[0], inputs_path = positional[1], outputs_path = positional[2];
  // The generated code checks each input's dtype, fixed sizes, strides and the range of every
  // dynamic size, but only when this variable is set; without it a wrong input is not caught and the
  // model reads memory it was never given. The range is PyTorch's own: it starts at 2 for a size
  // exported with a minimum of 1 (the side-by-side page shows batch 1 refused).
  setenv("AOTI_RUNTIME_CHECK_INPUTS", "1", /*overwrite=*/0);

  for (const std::string& library : libraries) {
    // RTLD_GLOBAL: the operators' symbols must be visible to the model's own library, loaded later.
    if (dlopen(library.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      return fail(kBadLibrary, "could not load operator library " + library + ": " + dlerror(),
                  "a library's own dependencies must be loadable too (ldd LIB.so lists them)");
    }
  }
  if (!std::filesystem::is_regular_file(package)) {
    return fail(kBadPackage, "no package file at " + package,
                "write one in Python with torch._inductor.aoti_compile_and_package(program, package_path=...)");
  }
  if (!std::filesystem::is_regular_file(inputs_path)) {
    return fail(kBadInputs, "no inputs file at " + inputs_path,
                "write the inputs in Python with torch.save([tensor, ...], path)");
  }

  if (threads > 0) at::set_num_threads(threads);
  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader;
  try {
    loader = std::make_unique<torch::inductor::AOTIModelPackageLoader>(package);
  } catch (const std::exception& e) {
    const std::string message = first_line(e.what());
    if (message.find("Could not find schema for") != std::string::npos) {
      return fail(kBadPackage, "could not load " + package + ": " + message,
                  "the program calls a custom operator that no loaded library registers: "
                  "pass the library that defines it with --load-library");
    }
    return fail(kBadPackage, "could not load " + package + ": " + message,
                "is it an AOTInductor package (.pt2) compiled for this CPU and this libtorch?");
  }
  double load_ms = milliseconds_since(start);

  std::vector<at::Tensor> inputs;
  try {
    inputs = load_inputs(inputs_path);
  } catch (const std::exception& e) {
    return fail(kBadInputs, "could not read " + inputs_path + ": " + first_line(e.what()),
                "write the inputs in Python with torch.save([tensor, ...], path)");
  }
  for (size_t i = 0; i < inputs.size(); ++i) std::cout << "input " << i << ": " << shape_of(inputs[i]) << "\n";

  std::vector<at::Tensor> outputs;
  start = std::chrono::steady_clock::now();
  try {
    outputs = loader->run(inputs);
  } catch (const std::exception& e) {
    // The first line is the model's own message: which input, which size, what it expected. It
    // names dtypes by number ("expected: 6(at::kFloat), but got: 7") and strides without the tensor:
    // the hint lists each input as given, dtype by name.
    std::string given;
    for (size_t i = 0; i < inputs.size(); ++i) {
      given += "\n  input " + std::to_string(i) + ": " + shape_of(inputs[i]) + ", strides " + strides_of(inputs[i]) +
               (inputs[i].is_contiguous() ? "" : " (not contiguous)");
    }
    return fail(kRefused, "the model refused the inputs: " + first_line(e.what()),
                "pass the inputs the program was exported with (count, dtype, sizes within the exported range, "
                "contiguous memory); given:" + given);
  }
  double run_ms = milliseconds_since(start);

  for (size_t i = 0; i < outputs.size(); ++i) std::cout << "output " << i << ": " << shape_of(outputs[i]) << "\n";
  // A tuple, not a tensor list: Python's torch.load (weights_only) accepts tuples of tensors.
  std::vector<c10::IValue> items(outputs.begin(), outputs.end());
  std::vector<char> bytes = torch::pickle_save(c10::ivalue::Tuple::create(std::move(items)));
  std::ofstream(outputs_path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  std::cout << "loaded in " << load_ms << " ms, ran in " << run_ms << " ms" << std::endl;
  if (repeat > 0) {
    std::vector<double> times;
    for (int i = 0; i < repeat; ++i) {
      start = std::chrono::steady_clock::now();
      loader->run(inputs);
      times.push_back(milliseconds_since(start));
    }
    std::sort(times.begin(), times.end());
    std::cout << "repeated " << repeat << " runs on " << at::get_num_threads() << " thread(s): median "
              << times[times.size() / 2] << " ms, min " << times.front() << " ms" << std::endl;
  }
  return 0;
}
