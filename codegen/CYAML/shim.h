#ifndef OUTPOST_CYAML_SHIM_H
#define OUTPOST_CYAML_SHIM_H
#include <yaml.h>
#endif
