// Symbol visibility: libraries build with -fvisibility=hidden; HP_API marks what they export.
#ifndef HYPER_PARALLEL_COMMON_API_H_
#define HYPER_PARALLEL_COMMON_API_H_

#define HP_API [[gnu::visibility("default")]]

#endif  // HYPER_PARALLEL_COMMON_API_H_
