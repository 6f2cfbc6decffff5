// A C entry point over LLVM's demangler library, for pcmap-demangle's Rust side.
//
// It applies the rule llvm-symbolizer 22 applies to every function and data name
// (LLVMSymbolizer::DemangleName): the Itanium, Rust and D schemes through
// llvm::nonMicrosoftDemangle (which also accepts one leading '.'), then Microsoft names, which start
// with '?', with access specifiers, calling conventions, member kinds and return types left out.
#include "llvm/Demangle/Demangle.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

extern "C" char *pcmap_llvm_demangle(const char *name, size_t len) {
  std::string_view mangled(name, len);
  std::string result;
  if (llvm::nonMicrosoftDemangle(mangled, result)) {
    char *out = static_cast<char *>(std::malloc(result.size() + 1));
    if (out == nullptr)
      return nullptr;
    std::memcpy(out, result.data(), result.size());
    out[result.size()] = '\0';
    return out;
  }
  if (len > 0 && name[0] == '?') {
    int status = 0;
    char *out = llvm::microsoftDemangle(
        mangled, nullptr, &status,
        llvm::MSDemangleFlags(llvm::MSDF_NoAccessSpecifier |
                              llvm::MSDF_NoCallingConvention |
                              llvm::MSDF_NoMemberType | llvm::MSDF_NoReturnType));
    if (status == 0)
      return out;
    std::free(out);
  }
  return nullptr;
}

extern "C" void pcmap_llvm_demangle_free(char *p) { std::free(p); }
