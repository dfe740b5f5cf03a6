package kern

// kvaluesIQ4NL is the non-linear 4-bit codebook of IQ4_NL and IQ4_XS
// (ggml's kvalues_iq4nl).
var kvaluesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// kvaluesMXFP4 is the E2M1 codebook of MXFP4 and NVFP4 with every value
// doubled (ggml's kvalues_mxfp4); the block scales carry the factor 1/2.
var kvaluesMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
