"""The kernel side from user space (the only bcc user), by stage: kernel/ (what the running
kernel offers), build/ (compiling the probes), load/ (loading them and their layers), maps/
(the maps user space fills and reads) and attach/ (each layer's way in); layers.py names the
layers and capabilities.py is the doctor's view across the stages."""
