/* nrt_init where no backend can be created (NEURON_RT_BACKEND=auto, no /dev/neuron0): the
 * failure is the missing device, reported as discovery reports it (NRT_INVALID, "Cannot find
 * Neuron devices"), not a failure of a later step ("Failed to register
 * nrt_soft_incompat_callback"). run_c_tests.sh runs it without NEURON_RT_BACKEND, on machines
 * without a Neuron device, with its log in a file it then checks. */
#include "common.h"

int main(void) {
    EXPECT(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_INVALID);
    /* Still no backend: the same answer again, and nothing else works. */
    EXPECT(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_INVALID);
    nrt_tensor_t *t = NULL;
    EXPECT(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_HOST, 0, 4, "t", &t), NRT_UNINITIALIZED);
    nrt_close();
    printf("no_device: OK\n");
    return 0;
}
