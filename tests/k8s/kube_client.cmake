# The Kubernetes client's tests against a real kube-apiserver (tests/k8s/kube_client.sh driving
# kube_client_probe). Include this file from tests/k8s/CMakeLists.txt after gs_k8s_test() is
# defined, and the tests join the `k8s` control-plane fixture:
#   include(${CMAKE_CURRENT_SOURCE_DIR}/kube_client.cmake)
# Without that fixture (this branch alone), the test looks for a plane through
# GPUSCHED_K8S_STATE and GPUSCHED_K8S_CP (the control-plane.sh to ask for its `env`), or takes
# GS_K8S_KUBECONFIG as is, and is skipped (exit 77) with a message when none answers.
if(NOT TARGET gpusched_k8s)
  return()
endif()

add_executable(kube_client_probe ${CMAKE_CURRENT_LIST_DIR}/kube_client_probe.c)
target_link_libraries(kube_client_probe PRIVATE gpusched_k8s)

set(gs_kube_client_cmd bash ${CMAKE_CURRENT_LIST_DIR}/kube_client.sh
    $<TARGET_FILE:kube_client_probe>)
if(COMMAND gs_k8s_test)
  gs_k8s_test(k8s_client_list_watch_auth COMMAND ${gs_kube_client_cmd})
else()
  add_test(NAME k8s_client_list_watch_auth COMMAND ${gs_kube_client_cmd})
  set_tests_properties(k8s_client_list_watch_auth PROPERTIES LABELS k8s TIMEOUT 300)
endif()
set_tests_properties(k8s_client_list_watch_auth PROPERTIES SKIP_RETURN_CODE 77)
