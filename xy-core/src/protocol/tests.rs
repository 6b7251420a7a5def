//! Wire-shape pins for every method, notification and error code.
