int boost_ckpt_placeholder;
