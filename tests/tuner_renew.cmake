# tests/test_tuner_renew.c wraps volt_step_create (a renew that finds no memory) at link time
if(TARGET test_tuner_renew)
  target_link_options(test_tuner_renew PRIVATE "-Wl,--wrap=volt_step_create")
endif()
