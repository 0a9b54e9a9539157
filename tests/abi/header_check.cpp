// header_check.cpp - header_check.c compiled as C++ (see there).
#include "header_check.c"
