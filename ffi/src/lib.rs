//! The C ABI of lagless (see include/lagless.h).
