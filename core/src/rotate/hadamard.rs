//! Normalised Sylvester Walsh-Hadamard transforms with optional explicit signs. (Being
//! implemented.)
