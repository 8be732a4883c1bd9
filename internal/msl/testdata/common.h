// common.h: a shared header for the include test.
#ifndef TEST_COMMON_H
#define TEST_COMMON_H
struct scale_args {
    uint  n;
    float s;
};
#endif
