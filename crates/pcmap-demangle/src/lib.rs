//! Symbol demangling as llvm-symbolizer 22 does it.
//!
//! [`demangle`] answers one question for the whole workspace: what a symbol's name is in source
//! form. Built with LLVM found (see `build.rs`), it runs LLVM's own demangler library with
//! llvm-symbolizer's rule — Itanium C++, Rust and D names, one leading `.` allowed, then Microsoft
//! names starting with `?` — so `pcmap symbolize` prints the names llvm-symbolizer prints.
//! Without LLVM it falls back to the `cpp_demangle` crate for Itanium names; [`engine`] says which
//! one a build uses.
//!
//! ```
//! assert_eq!(pcmap_demangle::demangle("_Z3fooi"), "foo(int)");
//! assert_eq!(pcmap_demangle::demangle("main"), "main");
//! ```

use std::borrow::Cow;

/// `name` in source form, or `name` itself when it is not a mangled name the demangler accepts
/// (llvm-symbolizer's rule: an invalid mangling is printed as it is).
pub fn demangle(name: &str) -> Cow<'_, str> {
    // Every scheme starts with `_` (Itanium `_Z`/`__Z`, Rust `_R`, D `_D`), `.`, or `?`
    // (Microsoft): plain C names return without a call into the demangler.
    match name.as_bytes().first() {
        Some(b'_' | b'.' | b'?') => {}
        _ => return Cow::Borrowed(name),
    }
    match imp::demangle(name) {
        Some(d) => Cow::Owned(d),
        None => Cow::Borrowed(name),
    }
}

/// The demangler this build uses: `"LLVM 22.1.8"` (or another LLVM version found at build time)
/// or `"cpp_demangle"`.
pub fn engine() -> &'static str {
    imp::ENGINE
}

/// Whether this build demangles with LLVM's library (and so agrees with llvm-symbolizer).
pub fn is_llvm() -> bool {
    cfg!(pcmap_llvm_demangle)
}

#[cfg(pcmap_llvm_demangle)]
mod imp {
    use std::ffi::{CStr, c_char};

    pub const ENGINE: &str = concat!("LLVM ", env!("PCMAP_LLVM_DEMANGLE_VERSION"));

    unsafe extern "C" {
        fn pcmap_llvm_demangle(name: *const c_char, len: usize) -> *mut c_char;
        fn pcmap_llvm_demangle_free(p: *mut c_char);
    }

    pub fn demangle(name: &str) -> Option<String> {
        // SAFETY: the shim reads exactly `len` bytes of `name` and returns either null or a
        // NUL-terminated string it allocated with malloc, which is released below with free.
        unsafe {
            let out = pcmap_llvm_demangle(name.as_ptr().cast(), name.len());
            if out.is_null() {
                return None;
            }
            let s = CStr::from_ptr(out).to_string_lossy().into_owned();
            pcmap_llvm_demangle_free(out);
            Some(s)
        }
    }
}

#[cfg(not(pcmap_llvm_demangle))]
mod imp {
    pub const ENGINE: &str = "cpp_demangle";

    pub fn demangle(name: &str) -> Option<String> {
        // LLVM's rule: one leading '.' is kept in front of the demangled name.
        let (dot, rest) = match name.strip_prefix('.') {
            Some(rest) => (".", rest),
            None => ("", name),
        };
        if !(rest.starts_with("_Z") || rest.starts_with("__Z")) {
            return None;
        }
        let sym = cpp_demangle::Symbol::new(rest).ok()?;
        let d = sym
            .demangle_with_options(&cpp_demangle::DemangleOptions::default())
            .ok()?;
        Some(format!("{dot}{d}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_unchanged_and_borrowed() {
        for n in ["main", "", "foo.cold", "_start", "?", "."] {
            assert_eq!(demangle(n), n);
        }
        assert!(matches!(demangle("main"), Cow::Borrowed(_)));
    }

    #[test]
    fn invalid_manglings_are_printed_as_they_are() {
        for n in ["_Z", "_Zfoo", "_ZN3foo", "__Z", "._Z"] {
            assert_eq!(demangle(n), n, "{n}");
        }
    }

    proptest::proptest! {
        /// Arbitrary text never panics the demangler (C++ on the other side of the FFI included)
        /// and comes back unchanged unless it starts like a mangled name.
        #[test]
        fn any_text_is_safe(s in "(_Z|_R|\\?|\\._Z|__Z)?[ -~]{0,40}") {
            let d = demangle(&s);
            if !s.starts_with(['_', '.', '?']) {
                proptest::prop_assert_eq!(d, s.as_str());
            }
        }
    }
}
