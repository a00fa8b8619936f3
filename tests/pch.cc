// The translation unit that compiles the test programs' precompiled header
// (CMakeLists.txt, outbox_test_pch); it has no code of its own.
